"""Choosing a click's stream and offer (`Router.route`), and the route summary that records how.

`Router.route()` is the one routing function: the click pipeline (models/clicks/tracker.py),
`lanner simulate` and `lanner click show` all call it, with the campaigns as models/routing/config.py
loads them.

Order (as Keitaro users expect): a bound visitor's previous stream (campaign option), then
intercepting streams (first match by position), regular streams (by position: first match; by
weight: weighted random among the matching ones), fallback streams (first match); no stream →
the campaign's default action. A stream matches when it is not capped (its click limit) and its
filters pass; an offers stream whose offers are all capped (and that has no usable fallback offer)
does not match either, so routing goes on to the next stream.

The route summary (this module writes it in `Route.steps` and reads it back in `read_summary`;
stored with the click as the `route` column), one space-separated step each:
`12-1` stream 12 did not match: its filter 1 (counted from 0) failed, the ones before it passed (all
of its filters must pass), `12-` none of its filters passed (any one must), `12c` stream 12 is capped,
`12o` its offers are all capped, `13+` stream 13 chosen, all its filters passed (or it has none), `13+2`
chosen on its filter 2 (any one must pass), `w 13+` chosen by weight among the matching streams,
`b13` bound visitor, `>alias` sent to another campaign; the offer, after its stream: `o5` offer 5
chosen, after `w` (by weight among several), `u` (among offers the visitor has not seen: unvisited
rotation), `f` (the stream's fallback offer, its other offers all capped) or `t` (by the shares of a
bandit rotation, models/routing/bandit.py: the open offers' shares, renormalised); `l7` lander 7
chosen: a stream with landers sends the click to one of them (by weight, or after `t` by the shares
of a lander bandit rotation) and chooses no offer now: the
offer is chosen at the LP click (`Router.choose_offer`, models/clicks/tracker.py `lp_click`), where its
rotation and caps apply. The click's answer, origin and bot reason end the summary
(models/routing/path.py); a summary of a release before them has no such step and no filter places.
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from models.routing.bandit import BANDIT_ROTATIONS, BanditShares
from models.routing.caps import ClickCounters
from models.routing.config import CampaignConfig, LanderChoice, OfferChoice, StreamConfig
from models.routing.filters import FilterSubject

MAX_CAMPAIGN_HOPS = 3  # "Send to campaign" chains longer than this end in the last campaign's default.


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
    lander: LanderChoice | None = None  # The lander the click goes to (then offer is None).

    @property
    def summary(self) -> str:
        return " ".join(self.steps)


@dataclass
class TraceEntry:
    """One stream considered, for `lanner simulate` / `lanner click show`."""

    campaign: str
    stream: StreamConfig
    verdict: str  # matched, no match, capped, offers capped, bound
    filters: list[tuple[str, bool | None, str]] = field(default_factory=list)  # None: input not stored


class Router:
    """Routes with one worker's config, counters, bandit shares and random source."""

    def __init__(
        self, counters: ClickCounters, rng: random.Random, bandit: BanditShares | None = None
    ) -> None:
        self.counters = counters
        self.rng = rng
        self.bandit = bandit if bandit is not None else BanditShares()

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
                return self._routed(campaign, stream, offer, steps)
        if campaign.rotation == "weight" and len(campaign.regular) > 1:
            matching, passed = [], []
            for stream in campaign.regular:
                step = self._passes(campaign, stream, subject, now_ms, steps, trace)
                if step is not None:
                    matching.append(stream)
                    passed.append(step)
            if matching:
                pick = self._weighted(range(len(matching)), [s.weight for s in matching])
                stream = matching[pick]
                if len(matching) > 1:
                    steps.append("w")
                steps.append(passed[pick])
                if stream.landers and stream.action == "offers":
                    return self._to_lander(campaign, stream, steps)
                if stream.action != "offers":
                    return Route(campaign, stream, None, steps)
                offer = self._choose_offer(stream, history, now_ms, steps)
                self._record(steps, offer)
                return Route(campaign, stream, offer, steps)
        else:
            for stream in campaign.regular:
                offer = self._try(campaign, stream, subject, history, now_ms, steps, trace)
                if offer is not False:
                    return self._routed(campaign, stream, offer, steps)
        for stream in campaign.fallback:
            offer = self._try(campaign, stream, subject, history, now_ms, steps, trace)
            if offer is not False:
                return self._routed(campaign, stream, offer, steps)
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
    ) -> OfferChoice | None | Literal[False]:
        """The stream's offer (None for one without offers, or with landers) if it matches, else False."""
        step = self._passes(campaign, stream, subject, now_ms, steps, trace)
        if step is None:
            return False
        steps.append(step)
        if stream.action != "offers" or stream.landers:  # With landers, the offer comes at the LP click.
            return None
        offer = self._choose_offer(stream, history, now_ms, steps)
        self._record(steps, offer)
        return offer

    def _passes(
        self,
        campaign: CampaignConfig,
        stream: StreamConfig,
        subject: FilterSubject,
        now_ms: int,
        steps: list[str],
        trace: list[TraceEntry] | None,
    ) -> str | None:
        """The stream's step if it matches (`13+`, `13+2`), else None with its failing step taken."""
        entry = None
        if trace is not None:
            entry = TraceEntry(campaign.alias, stream, "matched")
            trace.append(entry)
        if stream.is_capped(self.counters, now_ms):
            steps.append(f"{stream.id}c")
            if entry is not None:
                entry.verdict = "capped"
            return None
        outcome = stream.filters.outcome(subject, stream.id, entry.filters if entry is not None else None)
        if outcome[0] == "-":
            steps.append(f"{stream.id}{outcome}")
            if entry is not None:
                entry.verdict = "no match"
            return None
        if stream.action == "offers" and not self._has_open_offer(stream, now_ms):
            steps.append(f"{stream.id}o")
            if entry is not None:
                entry.verdict = "offers capped"
            return None
        return f"{stream.id}{outcome}"

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
        if stream.landers and stream.action == "offers":
            if not self._has_open_offer(stream, now_ms):
                return None
            steps.append(f"b{stream.id}")
            if trace is not None:
                trace.append(TraceEntry(campaign.alias, stream, "bound"))
            return self._to_lander(campaign, stream, steps)
        offer = stream.offer(last[1]) if stream.action == "offers" else None
        if stream.action == "offers" and (offer is None or offer.is_capped(self.counters, now_ms)):
            return None
        steps.append(f"b{stream.id}")
        if offer is not None:
            steps.append(f"o{offer.offer_id}")
        if trace is not None:
            trace.append(TraceEntry(campaign.alias, stream, "bound"))
        return Route(campaign, stream, offer, steps)

    def _routed(
        self, campaign: CampaignConfig, stream: StreamConfig, offer: OfferChoice | None, steps: list[str]
    ) -> Route:
        if stream.landers and stream.action == "offers":
            return self._to_lander(campaign, stream, steps)
        return Route(campaign, stream, offer, steps)

    def _to_lander(self, campaign: CampaignConfig, stream: StreamConfig, steps: list[str]) -> Route:
        landers = stream.landers
        if len(landers) == 1:
            lander = landers[0]
        elif stream.lander_rotation in BANDIT_ROTATIONS:
            steps.append("t")
            shares = self.bandit.lander_weights(stream.id, [x.lander_id for x in landers])
            lander = self._weighted(landers, shares)
        else:
            lander = self._weighted(landers, [x.weight for x in landers])
        steps.append(f"l{lander.lander_id}")
        return Route(campaign, stream, None, steps, lander)

    def choose_offer(self, stream: StreamConfig, history: History, now_ms: int) -> OfferChoice | None:
        """The offer of an LP click on a stream with landers: its rotation and caps, now."""
        steps: list[str] = []
        if stream.action != "offers" or not self._has_open_offer(stream, now_ms):
            return None
        return self._choose_offer(stream, history, now_ms, steps)

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
        if stream.offer_rotation in BANDIT_ROTATIONS:
            steps.append("t")
            shares = self.bandit.weights(stream.id, [offer.offer_id for offer in offers], len(stream.offers))
            return self._weighted(offers, shares)
        steps.append("w")
        return self._weighted(offers, [offer.weight for offer in offers])

    def _weighted(self, items: Sequence, weights: Sequence[float]):
        cumulative = list(itertools.accumulate(max(weight, 0) for weight in weights))
        if cumulative[-1] <= 0:
            return items[0]
        return items[bisect.bisect_right(cumulative, self.rng.random() * cumulative[-1])]

    @staticmethod
    def _record(steps: list[str], offer: OfferChoice | None) -> None:
        if offer is not None:
            steps.append(f"o{offer.offer_id}")


# The route summary read back: a stream step's sign, as a trace verdict.
STEP_VERDICTS = {"-": "no match", "c": "capped", "o": "offers capped", "+": "matched"}
_STREAM_STEP = re.compile(r"(\d+)([-+co])\d*")


def read_summary(summary: str) -> list[tuple[int, str]]:
    """(stream id, verdict) of each stream step in a stored route summary, in order ("bound" for `b13`).

    Offer steps (`o5`, `u`, `f`, `w`), campaign hops (`>alias`), landers and the path's answer, origin
    and bot steps (models/routing/path.py) name no stream considered; they are skipped.
    """
    steps = []
    for step in summary.split():
        if step.startswith("b") and step[1:].isdigit():
            steps.append((int(step[1:]), "bound"))
            continue
        found = _STREAM_STEP.fullmatch(step)
        if found is not None:
            steps.append((int(found[1]), STEP_VERDICTS[found[2]]))
    return steps
