"""Smart offer rotation: Thompson sampling, decided on the click path from shares the background computes.

Thompson sampling draws each arm's rate from its posterior (Beta(1 + conversions, 1 + clicks -
conversions) for CR; that draw times the arm's mean payout for EPC) and sends the click to the arm
whose draw is highest. Given the state, the arm it picks is a draw from each arm's probability of being
the best ("probability matching"): so the background (models/reporting/bandits.py, a minutely Huey task)
estimates those probabilities once with many draws, mixes in the minimum exploration share and stores
them as the stream's shares; a web worker reloads them when they move (models/clicks/tracker.py) and
the router picks by them as it picks by weight. Between two refreshes a per-click Thompson draw would
see the same state and pick with the same probabilities, at ~2 µs a Beta draw per arm and click
(docs/optimisation-rotation.md measures both).

Cap-aware: the router offers only the stream's active offers with a weight above 0 that are not capped
now; the shares of the open ones are renormalised among them, so a capped or paused offer is never
picked and its share goes to the others in proportion. (Exact Thompson sampling over the open offers
would give each its probability of being the best of them; the renormalised shares come close, and
differ only while a capped offer held much of the share.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

BANDIT_CR, BANDIT_EPC = "bandit_cr", "bandit_epc"
BANDIT_ROTATIONS = frozenset((BANDIT_CR, BANDIT_EPC))
EXPLORATION = 0.10  # Of the clicks, shared equally by the arms whatever their numbers.
DRAWS = 2000  # Thompson draws per refresh: the probabilities to about ±1 %.


@dataclass(frozen=True)
class ArmStats:
    arm_id: int
    clicks: int
    conversions: int
    revenue: float


def _posterior_draw(arm: ArmStats, metric: str, prior_payout: float, rng: random.Random) -> float:
    conversions = min(arm.conversions, arm.clicks)
    rate = rng.betavariate(1 + conversions, 1 + arm.clicks - conversions)
    if metric != BANDIT_EPC:
        return rate
    # The mean payout shrunk towards the stream's by one conversion's worth: an arm's first sale
    # neither makes nor breaks it.
    return rate * (arm.revenue + prior_payout) / (conversions + 1)


def best_probabilities(
    arms: Sequence[ArmStats], metric: str, rng: random.Random, draws: int = DRAWS
) -> dict[int, float]:
    """Each arm's probability of having the best CR (or EPC), estimated from `draws` Thompson draws."""
    if not arms:
        return {}
    if len(arms) == 1:
        return {arms[0].arm_id: 1.0}
    conversions = sum(min(a.conversions, a.clicks) for a in arms)
    prior_payout = sum(a.revenue for a in arms) / conversions if conversions else 1.0
    wins = dict.fromkeys((a.arm_id for a in arms), 0)
    for _ in range(draws):
        best = max(arms, key=lambda arm: _posterior_draw(arm, metric, prior_payout, rng))
        wins[best.arm_id] += 1
    return {arm_id: won / draws for arm_id, won in wins.items()}


def shares(probabilities: dict[int, float], exploration: float = EXPLORATION) -> dict[int, float]:
    """The share of clicks each arm gets: its probability of being best, with `exploration` spread evenly."""
    if not probabilities:
        return {}
    floor = exploration / len(probabilities)
    return {arm_id: floor + (1.0 - exploration) * p for arm_id, p in probabilities.items()}


class BanditShares:
    """A worker's shares per stream and offer, as the last refresh stored them (empty until one has)."""

    __slots__ = ("by_stream", "version")

    def __init__(self) -> None:
        self.by_stream: dict[int, dict[int, float]] = {}
        self.version: str | None = None

    def load(self, rows: Sequence[tuple[int, int, float]], version: str | None) -> None:
        """(stream id, offer id, share) rows, replacing what was held."""
        by_stream: dict[int, dict[int, float]] = {}
        for stream_id, offer_id, share in rows:
            by_stream.setdefault(stream_id, {})[offer_id] = share
        self.by_stream, self.version = by_stream, version

    def weights(self, stream_id: int, offer_ids: Sequence[int], arm_count: int) -> list[float]:
        """The shares of these (open) offers; an offer the refresh has not seen yet (added since) gets
        an even share of the stream's arms until it has."""
        known = self.by_stream.get(stream_id)
        even = 1.0 / arm_count
        if known is None:
            return [even] * len(offer_ids)
        return [known.get(offer_id, even) for offer_id in offer_ids]
