"""Smart offer and lander rotation: Thompson sampling, decided on the click path from shares the
background computes.

Thompson sampling draws each arm's rate from its posterior (Beta(1 + conversions, 1 + clicks -
conversions) for CR; that draw times the arm's mean payout for EPC) and sends the click to the arm
whose draw is highest. Given the state, the arm it picks is a draw from each arm's probability of being
the best ("probability matching"): so the background (models/reporting/bandits.py, a minutely Huey task)
estimates those probabilities once with many draws, mixes in the minimum exploration share and stores
them as the stream's shares; a web worker reloads them when they move (models/clicks/tracker.py) and
the router picks by them as it picks by weight. Between two refreshes a per-click Thompson draw would
see the same state and pick with the same probabilities, at ~2 µs a Beta draw per arm and click
(docs/optimisation-rotation.md measures both).

Landers (`stream.lander_rotation`): the same draws with a lander's clicks and, for bandit_cr, the
clicks that went on from it to the offer (its LP CTR; for bandit_epc its conversions and revenue), the
same exploration share; a lander has no cap, so its shares are used as they are.

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
    """A worker's shares per stream and offer (and per stream and lander), as the last refresh stored
    them (empty until one has)."""

    __slots__ = ("by_stream", "landers_by_stream", "version")

    def __init__(self) -> None:
        self.by_stream: dict[int, dict[int, float]] = {}
        self.landers_by_stream: dict[int, dict[int, float]] = {}
        self.version: str | None = None

    def load(
        self,
        rows: Sequence[tuple[int, int, float]],
        version: str | None,
        lander_rows: Sequence[tuple[int, int, float]] = (),
    ) -> None:
        """(stream id, offer id, share) and (stream id, lander id, share) rows, replacing what was held."""
        self.by_stream, self.landers_by_stream = _by_stream(rows), _by_stream(lander_rows)
        self.version = version

    def weights(self, stream_id: int, offer_ids: Sequence[int], arm_count: int) -> list[float]:
        """The shares of these (open) offers; an offer the refresh has not seen yet (added since) gets
        an even share of the stream's arms until it has."""
        return _weights(self.by_stream.get(stream_id), offer_ids, arm_count)

    def lander_weights(self, stream_id: int, lander_ids: Sequence[int]) -> list[float]:
        """The shares of the stream's landers, as `weights` gives the offers'."""
        return _weights(self.landers_by_stream.get(stream_id), lander_ids, len(lander_ids))


def _by_stream(rows: Sequence[tuple[int, int, float]]) -> dict[int, dict[int, float]]:
    by_stream: dict[int, dict[int, float]] = {}
    for stream_id, arm_id, share in rows:
        by_stream.setdefault(stream_id, {})[arm_id] = share
    return by_stream


def _weights(known: dict[int, float] | None, arm_ids: Sequence[int], arm_count: int) -> list[float]:
    even = 1.0 / arm_count
    if known is None:
        return [even] * len(arm_ids)
    return [known.get(arm_id, even) for arm_id in arm_ids]
