"""Campaign configuration as a web worker holds it, and the choice of stream and offer per click.

The configuration is loaded with the models (once per change, not per click) into frozen
dataclasses with compiled URL templates; the `config_version` row tells a worker to reload.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import random
from dataclasses import dataclass

from peewee import Database

from models.campaign import Campaign, Stream, StreamOffer
from models.macros import MacroError, UrlTemplate, compile_url
from models.offer import Offer

logger = logging.getLogger(__name__)

SQL_BUMP_CONFIG_VERSION = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'config_version'"

# Evaluation order of stream types (routing: intercepting first, then regular, then fallback).
STREAM_TYPE_ORDER = {"intercepting": 0, "regular": 1, "fallback": 2}


@dataclass(frozen=True)
class OfferChoice:
    offer_id: int
    template: UrlTemplate


@dataclass(frozen=True)
class StreamConfig:
    id: int
    type: str
    position: int
    weight: int
    action: str
    redirect: UrlTemplate | None
    offers: tuple[OfferChoice, ...]
    offer_cum_weights: tuple[int, ...]

    def choose_offer(self, rng: random.Random) -> OfferChoice | None:
        if not self.offers:
            return None
        if len(self.offers) == 1:
            return self.offers[0]
        pick = rng.random() * self.offer_cum_weights[-1]
        return self.offers[bisect.bisect_right(self.offer_cum_weights, pick)]


@dataclass(frozen=True)
class CampaignConfig:
    id: int
    alias: str
    name: str
    rotation: str
    uniqueness_ms: int
    intercepting: tuple[StreamConfig, ...]
    regular: tuple[StreamConfig, ...]
    fallback: tuple[StreamConfig, ...]
    regular_cum_weights: tuple[int, ...]

    def choose_stream(self, rng: random.Random) -> StreamConfig | None:
        """The stream this click goes to; filters arrive with the routing issue, so all match."""
        if self.intercepting:
            return self.intercepting[0]
        if self.regular:
            if self.rotation == "weight" and len(self.regular) > 1 and self.regular_cum_weights[-1] > 0:
                pick = rng.random() * self.regular_cum_weights[-1]
                return self.regular[bisect.bisect_right(self.regular_cum_weights, pick)]
            return self.regular[0]
        if self.fallback:
            return self.fallback[0]
        return None


def _template(url: str, what: str) -> UrlTemplate | None:
    try:
        return compile_url(url)
    except MacroError as exc:
        # Saved URLs are validated on save; a bad one here predates validation: skip, loudly.
        logger.error("%s has an invalid URL and gets no traffic: %s", what, exc)
        return None


def _stream_config(stream: Stream, links: list[tuple[StreamOffer, Offer]]) -> StreamConfig:
    offers = []
    weights = []
    for link, offer in links:
        template = _template(offer.url, f"offer {offer.id}")
        if template is None or link.weight <= 0:
            continue
        offers.append(OfferChoice(offer.id, template))
        weights.append(link.weight)
    redirect = (
        _template(stream.action_payload, f"stream {stream.id}") if stream.action == "redirect" else None
    )
    return StreamConfig(
        id=stream.id,
        type=stream.type,
        position=stream.position,
        weight=stream.weight,
        action=stream.action,
        redirect=redirect,
        offers=tuple(offers),
        offer_cum_weights=tuple(itertools.accumulate(weights)),
    )


def load_campaigns(db: Database) -> dict[str, CampaignConfig]:
    """Every active campaign by alias, with its active streams and offers in evaluation order."""
    links: dict[int, list[tuple[StreamOffer, Offer]]] = {}
    query = (
        StreamOffer.select(StreamOffer, Offer)
        .join(Offer)
        .where((StreamOffer.status == "active") & (Offer.status == "active"))
        .order_by(StreamOffer.id)
    )
    for link in query:
        links.setdefault(link.stream_id, []).append((link, link.offer))
    streams: dict[int, list[StreamConfig]] = {}
    for stream in Stream.select().where(Stream.status == "active").order_by(Stream.position, Stream.id):
        streams.setdefault(stream.campaign_id, []).append(_stream_config(stream, links.get(stream.id, [])))
    campaigns = {}
    for campaign in Campaign.select().where(Campaign.status == "active"):
        by_type: dict[str, list[StreamConfig]] = {"intercepting": [], "regular": [], "fallback": []}
        for stream in streams.get(campaign.id, []):
            by_type.setdefault(stream.type, []).append(stream)
        campaigns[campaign.alias] = CampaignConfig(
            id=campaign.id,
            alias=campaign.alias,
            name=campaign.name,
            rotation=campaign.rotation,
            uniqueness_ms=int(campaign.uniqueness_hours * 3_600_000),
            intercepting=tuple(by_type["intercepting"]),
            regular=tuple(by_type["regular"]),
            fallback=tuple(by_type["fallback"]),
            regular_cum_weights=tuple(itertools.accumulate(max(s.weight, 0) for s in by_type["regular"])),
        )
    return campaigns


def bump_config_version(db: Database) -> None:
    """Tell every web worker to reload campaigns (they look at most once a second)."""
    db.execute_sql(SQL_BUMP_CONFIG_VERSION)
