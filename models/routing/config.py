"""Campaign configuration as a web worker holds it, and the routing decision per click.

The configuration is loaded with the models (once per change, not per click) into frozen objects
with compiled URL templates and compiled filters; the `config_version` row tells a worker to
reload. `route()` is the one routing function: the click pipeline, `lanner simulate` and
`lanner click show` all call it.

Order (as Keitaro users expect): a bound visitor's previous stream (campaign option), then
intercepting streams (first match by position), regular streams (by position: first match; by
weight: weighted random among the matching ones), fallback streams (first match); no stream →
the campaign's default action. A stream matches when it is not capped (its click limit) and its
filters pass; an offers stream whose offers are all capped (and that has no usable fallback offer)
does not match either, so routing goes on to the next stream.

Every decision is summarised in `Route.steps` (stored with the click as the `route` column):
`12-` stream 12 did not match, `12c` stream 12 is capped, `12o` its offers are all capped,
`13+` stream 13 chosen, `b13` bound visitor, `>alias` sent to another campaign, then the offer:
`o5` chosen by weight, `u5` unvisited rotation, `f5` the stream's fallback offer.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import random
from dataclasses import dataclass, field
from typing import Callable
from zoneinfo import ZoneInfo

from peewee import Database

from models.routing.caps import OFFER, STREAM, ClickCounters, LocalDays, local_days
from models.routing.filters import (
    FilterError,
    FilterSubject,
    StreamFilters,
    compile_filters,
    validate_filters,
)
from models.routing.macros import MacroError, UrlTemplate, compile_url
from models.tables.campaign import Campaign, Stream, StreamOffer
from models.tables.offer import Offer

logger = logging.getLogger(__name__)


DEVICE_FILTERS = frozenset({"device", "os", "browser"})
MAX_CAMPAIGN_HOPS = 3  # "Send to campaign" chains longer than this end in the last campaign's default.


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


class History:
    """What routing needs to know of the visitor's earlier clicks (IP + UA) within the windows."""

    def seen_in_campaign(self, campaign_id: int) -> bool:
        raise NotImplementedError

    def seen_in_stream(self, stream_id: int) -> bool:
        raise NotImplementedError

    def offers_in_stream(self, stream_id: int) -> set[int]:
        raise NotImplementedError

    def last_in_campaign(self, campaign_id: int) -> tuple[int | None, int | None] | None:
        """(stream_id, offer_id) of the visitor's latest click in the campaign, or None."""
        raise NotImplementedError


@dataclass
class Route:
    campaign: CampaignConfig
    stream: StreamConfig | None
    offer: OfferChoice | None
    steps: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return " ".join(self.steps)


@dataclass
class TraceEntry:
    """One stream considered, for `lanner simulate` / `lanner click show`."""

    campaign: str
    stream: StreamConfig
    verdict: str  # matched, no match, capped, offers capped, bound
    filters: list[tuple[str, bool, str]] = field(default_factory=list)


class Router:
    """Routes with one worker's config, counters and random source."""

    def __init__(self, counters: ClickCounters, rng: random.Random) -> None:
        self.counters = counters
        self.rng = rng

    def route(
        self,
        campaign: CampaignConfig,
        subject: FilterSubject,
        history: History,
        now_ms: int,
        campaigns: dict[str, CampaignConfig],
        trace: list[TraceEntry] | None = None,
        prepare: Callable[[CampaignConfig], None] = lambda campaign: None,
    ) -> Route:
        """`prepare(campaign)` fills in the subject's lookups that campaign's filters need.

        PERF: parsing a new User-Agent (~20-70 µs under load) or checking it for bot signatures is
        done on the click path only for campaigns that filter on it; the spool flusher does the rest.
        """
        steps: list[str] = []
        for _ in range(MAX_CAMPAIGN_HOPS + 1):
            prepare(campaign)
            subject.is_unique_campaign = not history.seen_in_campaign(campaign.id)
            route = self._route_in(campaign, subject, history, now_ms, steps, trace)
            stream = route.stream
            if stream is None or stream.action != "campaign":
                return route
            target = campaigns.get(stream.payload)
            if target is None or target.id == campaign.id:
                return route  # A missing or self target: the stream's own answer is the default.
            steps.append(f">{target.alias}")
            campaign = target
        return Route(campaign, None, None, steps)

    def _route_in(
        self,
        campaign: CampaignConfig,
        subject: FilterSubject,
        history: History,
        now_ms: int,
        steps: list[str],
        trace: list[TraceEntry] | None,
    ) -> Route:
        if campaign.bind_visitor:
            bound = self._bound(campaign, history, now_ms, steps, trace)
            if bound is not None:
                return bound
        for stream in campaign.intercepting:
            offer = self._try(campaign, stream, subject, history, now_ms, steps, trace)
            if offer is not False:
                return Route(campaign, stream, offer, steps)
        if campaign.rotation == "weight" and len(campaign.regular) > 1:
            matching = []
            for stream in campaign.regular:
                offer = self._try(campaign, stream, subject, history, now_ms, steps, trace, choose=False)
                if offer is not False:
                    matching.append(stream)
            if matching:
                stream = self._weighted(matching, [s.weight for s in matching])
                offer = self._choose_offer(stream, history, now_ms, steps)
                steps.append(f"{stream.id}+")
                self._record(steps, offer)
                return Route(campaign, stream, offer if offer is not False else None, steps)
        else:
            for stream in campaign.regular:
                offer = self._try(campaign, stream, subject, history, now_ms, steps, trace)
                if offer is not False:
                    return Route(campaign, stream, offer, steps)
        for stream in campaign.fallback:
            offer = self._try(campaign, stream, subject, history, now_ms, steps, trace)
            if offer is not False:
                return Route(campaign, stream, offer, steps)
        return Route(campaign, None, None, steps)

    def _try(
        self,
        campaign: CampaignConfig,
        stream: StreamConfig,
        subject: FilterSubject,
        history: History,
        now_ms: int,
        steps: list[str],
        trace: list[TraceEntry] | None,
        *,
        choose: bool = True,
    ) -> OfferChoice | None | bool:
        """The stream's offer (None for a stream without offers) if it matches, else False."""
        entry = TraceEntry(campaign.alias, stream, "matched") if trace is not None else None
        if entry is not None:
            trace.append(entry)
        if stream.is_capped(self.counters, now_ms):
            steps.append(f"{stream.id}c")
            if entry is not None:
                entry.verdict = "capped"
            return False
        if not stream.filters.matches(subject, stream.id, entry.filters if entry is not None else None):
            steps.append(f"{stream.id}-")
            if entry is not None:
                entry.verdict = "no match"
            return False
        if stream.action != "offers":
            if choose:
                steps.append(f"{stream.id}+")
            return None
        if not self._has_open_offer(stream, now_ms):
            steps.append(f"{stream.id}o")
            if entry is not None:
                entry.verdict = "offers capped"
            return False
        if not choose:
            return None
        offer = self._choose_offer(stream, history, now_ms, steps)
        steps.append(f"{stream.id}+")
        self._record(steps, offer)
        return offer

    def _bound(
        self,
        campaign: CampaignConfig,
        history: History,
        now_ms: int,
        steps: list[str],
        trace: list[TraceEntry] | None,
    ) -> Route | None:
        last = history.last_in_campaign(campaign.id)
        if last is None:
            return None
        stream = campaign.streams.get(last[0]) if last[0] is not None else None
        if stream is None or stream.is_capped(self.counters, now_ms):
            return None
        offer = stream.offer(last[1]) if stream.action == "offers" else None
        if stream.action == "offers" and (offer is None or offer.is_capped(self.counters, now_ms)):
            return None
        steps.append(f"b{stream.id}")
        if offer is not None:
            steps.append(f"o{offer.offer_id}")
        if trace is not None:
            trace.append(TraceEntry(campaign.alias, stream, "bound"))
        return Route(campaign, stream, offer, steps)

    def _has_open_offer(self, stream: StreamConfig, now_ms: int) -> bool:
        if not stream.has_offer_caps:
            return bool(stream.offers) or stream.fallback_offer is not None
        counters = self.counters
        if any(not offer.is_capped(counters, now_ms) for offer in stream.offers):
            return True
        fallback = stream.fallback_offer
        return fallback is not None and not fallback.is_capped(counters, now_ms)

    def _choose_offer(
        self, stream: StreamConfig, history: History, now_ms: int, steps: list[str]
    ) -> OfferChoice | None:
        counters = self.counters
        if stream.has_offer_caps:
            offers = [offer for offer in stream.offers if not offer.is_capped(counters, now_ms)]
        else:
            offers = list(stream.offers)
        if not offers:
            fallback = stream.fallback_offer
            if fallback is not None and not fallback.is_capped(counters, now_ms):
                steps.append("f")
                return fallback
            return None
        if stream.offer_rotation == "unvisited" and len(offers) > 1:
            visited = history.offers_in_stream(stream.id)
            if visited:
                fresh = [offer for offer in offers if offer.offer_id not in visited]
                if fresh:
                    steps.append("u")
                    offers = fresh
        if len(offers) == 1:
            return offers[0]
        return self._weighted(offers, [offer.weight for offer in offers])

    def _weighted(self, items: list, weights: list[int]):
        cumulative = list(itertools.accumulate(max(weight, 0) for weight in weights))
        if cumulative[-1] <= 0:
            return items[0]
        return items[bisect.bisect_right(cumulative, self.rng.random() * cumulative[-1])]

    @staticmethod
    def _record(steps: list[str], offer: OfferChoice | None) -> None:
        if offer is not None:
            steps.append(f"o{offer.offer_id}")


def _template(url: str, what: str) -> UrlTemplate | None:
    try:
        return compile_url(url)
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


def _offer_choice(offer: Offer, weight: int) -> OfferChoice | None:
    template = _template(offer.url, f"offer {offer.id}")
    if template is None:
        return None
    return OfferChoice(
        offer.id, template, weight, offer.daily_cap, offer.total_cap, local_days(offer.timezone)
    )


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
) -> StreamConfig | None:
    filters = _stream_filters(stream, tz)
    if filters is None:
        return None
    offers = []
    for link, offer in links:
        choice = _offer_choice(offer, link.weight) if link.weight > 0 else None
        if choice is not None:
            offers.append(choice)
    fallback = None
    if stream.fallback_offer_id is not None and stream.fallback_offer_id in offers_by_id:
        fallback = _offer_choice(offers_by_id[stream.fallback_offer_id], 1)
    redirect = (
        _template(stream.action_payload, f"stream {stream.id}") if stream.action == "redirect" else None
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
    )


def load_campaigns(db: Database) -> dict[str, CampaignConfig]:
    """Every active campaign by alias, with its active streams and offers in evaluation order."""
    offers_by_id = {offer.id: offer for offer in Offer.select().where(Offer.status == "active")}
    links: dict[int, list[tuple[StreamOffer, Offer]]] = {}
    for link in StreamOffer.select().where(StreamOffer.status == "active").order_by(StreamOffer.id):
        offer = offers_by_id.get(link.offer_id)
        if offer is not None:
            links.setdefault(link.stream_id, []).append((link, offer))
    streams: dict[int, list[Stream]] = {}
    for stream in Stream.select().where(Stream.status == "active").order_by(Stream.position, Stream.id):
        streams.setdefault(stream.campaign_id, []).append(stream)
    campaigns = {}
    for campaign in Campaign.select().where(Campaign.status == "active"):
        tz = _zone(campaign.timezone, f"campaign {campaign.alias}")
        by_type: dict[str, list[StreamConfig]] = {"intercepting": [], "regular": [], "fallback": []}
        by_id = {}
        for stream in streams.get(campaign.id, []):
            config = _stream_config(stream, campaign, tz, links.get(stream.id, []), offers_by_id)
            if config is not None:
                by_type.setdefault(config.type, []).append(config)
                by_id[config.id] = config
        default_redirect = None
        if campaign.default_action == "redirect":
            default_redirect = _template(campaign.default_payload, f"campaign {campaign.alias} default")
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
        )
    return campaigns
