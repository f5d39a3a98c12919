"""Campaign configuration as a web worker holds it: campaigns, their streams and offers, loaded.

The configuration is loaded with the models (once per change, not per click) into frozen objects
with compiled URL templates and compiled filters; the `config_version` row tells a worker to
reload. models/routing/router.py routes a click with them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from peewee import Database

from models.routing.caps import OFFER, STREAM, ClickCounters, LocalDays, local_days
from models.routing.filters import (
    NETWORK_FILTERS,
    FilterError,
    StreamFilters,
    compile_filters,
    validate_filters,
)
from models.routing.macros import LANDER_MACROS, MacroError, UrlTemplate, compile_url, rename_macros
from models.routing.sources import loads as source_parameters
from models.routing.sources import slot_of
from models.tables.campaign import Campaign, Stream, StreamOffer
from models.tables.lander import Lander, StreamLander
from models.tables.offer import Offer
from models.tables.source import TrafficSource

logger = logging.getLogger(__name__)


DEVICE_FILTERS = frozenset({"device", "os", "browser"})


@dataclass(frozen=True)
class OfferChoice:
    offer_id: int
    template: UrlTemplate
    weight: int
    daily_cap: int | None
    total_cap: int | None
    days: LocalDays  # The offer's timezone, for its daily cap.

    def is_capped(self, counters: ClickCounters, now_ms: int) -> bool:
        if self.daily_cap is None and self.total_cap is None:
            return False
        return counters.is_capped(OFFER, self.offer_id, self.daily_cap, self.total_cap, self.days.day(now_ms))


@dataclass(frozen=True)
class LanderChoice:
    """A lander a stream sends to: remote (its URL template, with {offer} among the macros) or local
    (its folder under DATA_DIR/landers, served at /landers/<folder>/)."""

    lander_id: int
    name: str
    kind: str  # remote, local
    template: UrlTemplate | None  # remote
    folder: str  # local
    weight: int


@dataclass(frozen=True)
class StreamConfig:
    id: int
    name: str
    type: str
    position: int
    weight: int
    action: str  # offers, redirect, html, not_found, campaign
    redirect: UrlTemplate | None  # action "redirect"
    payload: str  # action "html": the page; action "campaign": the target alias
    redirect_type: str  # http, meta, js
    offers: tuple[OfferChoice, ...]
    offer_rotation: str  # weight, unvisited
    fallback_offer: OfferChoice | None
    daily_cap: int | None
    total_cap: int | None
    filters: StreamFilters
    days: LocalDays  # The campaign's timezone, for the stream's daily cap.
    has_offer_caps: bool = False  # PERF: most streams have none; skip the per-offer checks then.
    # A click routed here goes to one of them (by weight); its offer is chosen at the LP click.
    landers: tuple[LanderChoice, ...] = ()
    lander_rotation: str = "weight"  # weight, bandit_cr, bandit_epc (by the shares of a refresh)

    def is_capped(self, counters: ClickCounters, now_ms: int) -> bool:
        if self.daily_cap is None and self.total_cap is None:
            return False
        return counters.is_capped(STREAM, self.id, self.daily_cap, self.total_cap, self.days.day(now_ms))

    def offer(self, offer_id: int | None) -> OfferChoice | None:
        for offer in self.offers:
            if offer.offer_id == offer_id:
                return offer
        if self.fallback_offer is not None and self.fallback_offer.offer_id == offer_id:
            return self.fallback_offer
        return None


@dataclass(frozen=True)
class CampaignConfig:
    id: int
    alias: str
    name: str
    rotation: str
    uniqueness_ms: int
    tz: ZoneInfo
    bind_visitor: bool
    default_action: str  # not_found, redirect, blank
    default_redirect: UrlTemplate | None
    intercepting: tuple[StreamConfig, ...]
    regular: tuple[StreamConfig, ...]
    fallback: tuple[StreamConfig, ...]
    streams: dict[int, StreamConfig] = field(default_factory=dict)
    # A stream filters on device, os or browser / on bot: look the visitor up before routing.
    needs_device: bool = False
    needs_bot: bool = False
    needs_network: bool = False  # A stream filters on isp, connection or carrier.
    # Its traffic source's parameter name -> sub_id slot (1-based); None: no source (or none that
    # fills a slot), and the click path reads the query as it always did.
    source_slots: dict[str, int] | None = None
    token: str | None = None  # Its Click API token (routes/clickapi.py); None: none.


@dataclass(frozen=True)
class SourceMacros:
    """How a campaign's URLs read the traffic sources' parameter names as macros, resolved at load.

    `{zoneid}` is accepted in any URL while some source defines it (`names`); in a campaign whose
    source maps it to a slot it renders that slot's value (`renames`), elsewhere it renders empty."""

    names: frozenset[str] = frozenset()
    renames: dict[str, str] = field(default_factory=dict)


NO_SOURCE_MACROS = SourceMacros()


def _template(
    url: str, what: str, macros: SourceMacros = NO_SOURCE_MACROS, extra: frozenset[str] = frozenset()
) -> UrlTemplate | None:
    try:
        return compile_url(rename_macros(url, macros.renames), macros.names | extra)
    except MacroError as exc:
        # Saved URLs are validated on save; a bad one here predates validation: skip, loudly.
        logger.error("%s has an invalid URL and gets no traffic: %s", what, exc)
        return None


def _zone(name: str, what: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        logger.error("%s has an unknown timezone %r; using UTC", what, name)
        return ZoneInfo("UTC")


def _offer_choice(offer: Offer, weight: int, macros: SourceMacros) -> OfferChoice | None:
    template = _template(offer.url, f"offer {offer.id}", macros)
    if template is None:
        return None
    return OfferChoice(
        offer.id, template, weight, offer.daily_cap, offer.total_cap, local_days(offer.timezone)
    )


def _lander_choice(lander: Lander, weight: int, macros: SourceMacros) -> LanderChoice | None:
    if lander.kind == "local":
        if not lander.folder or "/" in lander.folder or lander.folder.startswith("."):
            logger.error("lander %s has no usable folder and gets no traffic", lander.id)
            return None
        return LanderChoice(lander.id, lander.name, "local", None, lander.folder, weight)
    template = _template(lander.url, f"lander {lander.id}", macros, LANDER_MACROS)
    if template is None:
        return None
    return LanderChoice(lander.id, lander.name, "remote", template, "", weight)


def _stream_filters(stream: Stream, tz: ZoneInfo) -> StreamFilters | None:
    try:
        return compile_filters(validate_filters(json.loads(stream.filters or "[]")), stream.filter_mode, tz)
    except (FilterError, ValueError) as exc:
        logger.error("stream %s has invalid filters and gets no traffic: %s", stream.id, exc)
        return None


def _stream_config(
    stream: Stream,
    campaign: Campaign,
    tz: ZoneInfo,
    links: list[tuple[StreamOffer, Offer]],
    offers_by_id: dict[int, Offer],
    macros: SourceMacros,
    lander_links: Sequence[tuple[StreamLander, Lander]] = (),
) -> StreamConfig | None:
    filters = _stream_filters(stream, tz)
    if filters is None:
        return None
    offers = []
    for link, offer in links:
        choice = _offer_choice(offer, link.weight, macros) if link.weight > 0 else None
        if choice is not None:
            offers.append(choice)
    fallback = None
    if stream.fallback_offer_id is not None and stream.fallback_offer_id in offers_by_id:
        fallback = _offer_choice(offers_by_id[stream.fallback_offer_id], 1, macros)
    landers = []
    for lander_link, lander in lander_links:
        lander_choice = _lander_choice(lander, lander_link.weight, macros) if lander_link.weight > 0 else None
        if lander_choice is not None:
            landers.append(lander_choice)
    redirect = (
        _template(stream.action_payload, f"stream {stream.id}", macros)
        if stream.action == "redirect"
        else None
    )
    return StreamConfig(
        id=stream.id,
        name=stream.name,
        type=stream.type,
        position=stream.position,
        weight=stream.weight,
        action=stream.action,
        redirect=redirect,
        payload=stream.action_payload,
        redirect_type=stream.redirect_type,
        offers=tuple(offers),
        offer_rotation=stream.offer_rotation,
        fallback_offer=fallback,
        daily_cap=stream.daily_cap,
        total_cap=stream.total_cap,
        filters=filters,
        days=local_days(campaign.timezone),
        has_offer_caps=any(
            o.daily_cap is not None or o.total_cap is not None
            for o in (*offers, *([fallback] if fallback else []))
        ),
        landers=tuple(landers),
        lander_rotation=stream.lander_rotation,
    )


# What routing reads of a campaign: not its owner and whatever else the panel keeps on it.
ROUTED_CAMPAIGN_FIELDS = (
    Campaign.id,
    Campaign.alias,
    Campaign.name,
    Campaign.rotation,
    Campaign.uniqueness_hours,
    Campaign.timezone,
    Campaign.bind_visitor,
    Campaign.default_action,
    Campaign.default_payload,
    Campaign.source_id,
    Campaign.token,
)


def _source_slots(db: Database) -> tuple[frozenset[str], dict[int, dict[str, int]]]:
    """Every source's parameter names, and each source's name -> sub_id slot."""
    names: set[str] = set()
    slots = {}
    for source in TrafficSource.select(TrafficSource.id, TrafficSource.parameters):
        parameters = source_parameters(source.parameters)
        names.update(p["name"] for p in parameters)
        slots[source.id] = slot_of(parameters)
    return frozenset(names), slots


def load_campaigns(db: Database) -> dict[str, CampaignConfig]:
    """Every active campaign by alias, with its active streams, offers and landers in evaluation order."""
    offers_by_id = {offer.id: offer for offer in Offer.select().where(Offer.status == "active")}
    links: dict[int, list[tuple[StreamOffer, Offer]]] = {}
    for link in StreamOffer.select().where(StreamOffer.status == "active").order_by(StreamOffer.id):
        offer = offers_by_id.get(link.offer_id)
        if offer is not None:
            links.setdefault(link.stream_id, []).append((link, offer))
    landers_by_id = {lander.id: lander for lander in Lander.select().where(Lander.status == "active")}
    lander_links: dict[int, list[tuple[StreamLander, Lander]]] = {}
    for lander_link in StreamLander.select().where(StreamLander.status == "active").order_by(StreamLander.id):
        lander = landers_by_id.get(lander_link.lander_id)
        if lander is not None:
            lander_links.setdefault(lander_link.stream_id, []).append((lander_link, lander))
    streams: dict[int, list[Stream]] = {}
    for stream in Stream.select().where(Stream.status == "active").order_by(Stream.position, Stream.id):
        streams.setdefault(stream.campaign_id, []).append(stream)
    source_names, source_slots = _source_slots(db)
    campaigns = {}
    for campaign in Campaign.select(*ROUTED_CAMPAIGN_FIELDS).where(Campaign.status == "active"):
        tz = _zone(campaign.timezone, f"campaign {campaign.alias}")
        slots = source_slots.get(campaign.source_id) if campaign.source_id is not None else None
        macros = SourceMacros(source_names, {name: f"sub_id_{slot}" for name, slot in (slots or {}).items()})
        by_type: dict[str, list[StreamConfig]] = {"intercepting": [], "regular": [], "fallback": []}
        by_id = {}
        for stream in streams.get(campaign.id, []):
            config = _stream_config(
                stream,
                campaign,
                tz,
                links.get(stream.id, []),
                offers_by_id,
                macros,
                lander_links.get(stream.id, []),
            )
            if config is not None:
                by_type.setdefault(config.type, []).append(config)
                by_id[config.id] = config
        default_redirect = None
        if campaign.default_action == "redirect":
            default_redirect = _template(
                campaign.default_payload, f"campaign {campaign.alias} default", macros
            )
        campaigns[campaign.alias] = CampaignConfig(
            id=campaign.id,
            alias=campaign.alias,
            name=campaign.name,
            rotation=campaign.rotation,
            uniqueness_ms=int(campaign.uniqueness_hours * 3_600_000),
            tz=tz,
            bind_visitor=bool(campaign.bind_visitor),
            default_action=campaign.default_action,
            default_redirect=default_redirect,
            intercepting=tuple(by_type["intercepting"]),
            regular=tuple(by_type["regular"]),
            fallback=tuple(by_type["fallback"]),
            streams=by_id,
            needs_device=any(DEVICE_FILTERS & stream.filters.names for stream in by_id.values()),
            needs_bot=any("bot" in stream.filters.names for stream in by_id.values()),
            needs_network=any(NETWORK_FILTERS & stream.filters.names for stream in by_id.values()),
            source_slots=slots,
            token=campaign.token,
        )
    return campaigns
