"""Simulations of smart rotation and split tests, with known true rates (`lanner bench smart-rotation`).

(a) Bandit against weighted rotation: offers with known conversion rates, clicks sent one by one, the
    bandit's shares recomputed every `refresh_every` clicks (the minutely refresh) with the code the
    tracker runs (models/routing/bandit.py). Regret is the expected conversions lost to not sending
    every click to the best offer: sum over clicks of (best rate - chosen offer's rate).
(b) A/A tests: two arms with the same rate, read after every `peek_every` clicks until `horizon`;
    a false winner is a test in which any read names one. The sequential test
    (models/reporting/sequential.py) against the naive fixed-horizon z-test (|z| > 1.96) read the same way.
(c) A/B tests with a real lift: how often and how soon the sequential test finds the better arm.
(d) The same A/A and A/B tests at landers' LP CTRs (LP clicks / lander views, 10-40 %), read after
    every 100 lander views: a lander test's verdict is the same test on those two counts, at rates an
    offer's CR never reaches, so its guarantee is measured there too.

Pure Python (numpy is no dependency): binomial counts by inversion, seeded, so a run is repeatable.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import asdict, dataclass

from models.reporting.sequential import is_decided, judge, naive_z
from models.routing.bandit import BANDIT_CR, EXPLORATION, ArmStats, best_probabilities, shares

NAIVE_Z = 1.959964  # Two-sided 5 %.


def binomial(rng: random.Random, n: int, p: float) -> int:
    """A Binomial(n, p) draw by inversion of its CDF (a few steps for the small n * p here)."""
    if p <= 0.0 or n <= 0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    u = rng.random()
    q = 1.0 - p
    prob = q**n
    cdf = prob
    k = 0
    ratio = p / q
    while u > cdf and k < n:
        prob *= (n - k) / (k + 1) * ratio
        cdf += prob
        k += 1
    return k


@dataclass
class BanditResult:
    rates: list[float]
    clicks: int
    runs: int
    regret_bandit: float  # Mean over runs, conversions.
    regret_weighted: float
    best_share_last_fifth: float  # Mean share of the last fifth of the clicks sent to the best offer.
    best_share_final: float  # The best offer's share at the last refresh (mean over runs).
    conversions_bandit: float
    conversions_weighted: float


def simulate_bandit(
    rates: list[float],
    *,
    clicks: int = 20_000,
    runs: int = 100,
    refresh_every: int = 1_000,
    draws: int = 500,
    seed: int = 1,
) -> BanditResult:
    """Bandit (bandit_cr) against even weighted rotation over the same offers."""
    rng = random.Random(seed)
    best = max(rates)
    arms = range(len(rates))
    regrets, last_shares, final_shares, conversions_bandit, conversions_weighted = [], [], [], [], []
    for _ in range(runs):
        sent = [0] * len(rates)
        converted = [0] * len(rates)
        regret = 0.0
        last_fifth_best = 0
        share_now = [1.0 / len(rates)] * len(rates)
        for start in range(0, clicks, refresh_every):
            batch = min(refresh_every, clicks - start)
            cumulative = list(_accumulate(share_now))
            for index in range(batch):
                arm = _pick(cumulative, rng.random() * cumulative[-1])
                sent[arm] += 1
                if rng.random() < rates[arm]:
                    converted[arm] += 1
                regret += best - rates[arm]
                if start + index >= clicks * 4 // 5 and rates[arm] == best:
                    last_fifth_best += 1
            stats = [ArmStats(arm, sent[arm], converted[arm], 0.0) for arm in arms]
            arm_shares = shares(best_probabilities(stats, BANDIT_CR, rng, draws), EXPLORATION)
            share_now = [arm_shares[arm] for arm in arms]
        regrets.append(regret)
        last_shares.append(last_fifth_best / (clicks - clicks * 4 // 5))
        final_shares.append(share_now[rates.index(best)])
        conversions_bandit.append(sum(converted))
        # Even weighted rotation: each click to an arm at random; its regret's expectation is exact.
        weighted = [binomial(rng, clicks // len(rates), rate) for rate in rates]
        conversions_weighted.append(sum(weighted))
    return BanditResult(
        rates,
        clicks,
        runs,
        round(statistics.fmean(regrets), 1),
        round(clicks * (best - statistics.fmean(rates)), 1),
        round(statistics.fmean(last_shares), 4),
        round(statistics.fmean(final_shares), 4),
        round(statistics.fmean(conversions_bandit), 1),
        round(statistics.fmean(conversions_weighted), 1),
    )


def _accumulate(values: list[float]):
    total = 0.0
    for value in values:
        total += value
        yield total


def _pick(cumulative: list[float], point: float) -> int:
    for index, bound in enumerate(cumulative):
        if point < bound:
            return index
    return len(cumulative) - 1


@dataclass
class PeekResult:
    rate_a: float
    rate_b: float
    tests: int
    peek_every: int  # Clicks (both arms together) between reads.
    horizon: int  # Clicks (both arms together) of each test.
    sequential_winners: int  # Tests in which the sequential test ever named a winner.
    naive_winners: int  # ...the naive z-test.
    sequential_rate: float
    naive_rate: float
    right_winners: int  # Of the sequential winners, those naming the truly better arm (B).
    median_clicks_to_winner: float | None  # Of the sequential winners.


def simulate_peeking(
    rate_a: float,
    rate_b: float,
    *,
    tests: int = 10_000,
    peek_every: int = 100,
    horizon: int = 10_000,
    seed: int = 2,
) -> PeekResult:
    """`tests` split tests of two arms, each read after every `peek_every` clicks (split evenly)."""
    rng = random.Random(seed)
    half = peek_every // 2
    sequential = naive = right = 0
    stops = []
    for _ in range(tests):
        clicks = conversions_a = conversions_b = 0
        found_sequential = found_naive = False
        while clicks < horizon and not (found_sequential and found_naive):
            clicks += 2 * half
            conversions_a += binomial(rng, half, rate_a)
            conversions_b += binomial(rng, half, rate_b)
            n = clicks // 2
            if not found_naive and abs(naive_z(n, conversions_a, n, conversions_b)) > NAIVE_Z:
                found_naive = True
                naive += 1
            if not found_sequential and is_decided(n, conversions_a, n, conversions_b):
                found_sequential = True
                sequential += 1
                stops.append(clicks)
                right += conversions_b > conversions_a
    return PeekResult(
        rate_a,
        rate_b,
        tests,
        peek_every,
        horizon,
        sequential,
        naive,
        round(sequential / tests, 4),
        round(naive / tests, 4),
        right,
        statistics.median(stops) if stops else None,
    )


@dataclass
class ManyArmsResult:
    arms: int
    rate: float
    tests: int
    horizon: int
    false_winners: (
        int  # Tests in which the split test's verdict (models/reporting/sequential.judge) ever named one.
    )
    false_rate: float


def simulate_many_arms(
    arms: int, rate: float, *, tests: int = 2_000, peek_every: int = 100, horizon: int = 10_000, seed: int = 3
) -> ManyArmsResult:
    """A/A/... tests of `arms` equal arms read after every `peek_every` clicks (split evenly), judged as the
    split test report judges them: the leader against every other arm at alpha / pairs."""
    rng = random.Random(seed)
    share = peek_every // arms
    found = 0
    for _ in range(tests):
        conversions = [0] * arms
        clicks = 0
        while clicks < horizon:
            clicks += share * arms
            for arm in range(arms):
                conversions[arm] += binomial(rng, share, rate)
            if judge([(clicks // arms, c) for c in conversions]).is_winner:
                found += 1
                break
    return ManyArmsResult(arms, rate, tests, horizon, found, round(found / tests, 4))


def standard_error(rate: float, runs: int) -> float:
    return math.sqrt(rate * (1 - rate) / runs)


def run_all(*, quick: bool = False) -> dict:
    """The figures of docs/optimisation-rotation.md (quick: a twentieth of the runs)."""
    scale = 20 if quick else 1
    return {
        "bandit": [
            asdict(simulate_bandit(rates, runs=100 // scale, seed=seed))
            for seed, rates in enumerate(([0.02, 0.025, 0.035], [0.05, 0.05, 0.06, 0.04]), start=1)
        ],
        "aa": [
            asdict(simulate_peeking(rate, rate, tests=10_000 // scale, seed=seed))
            for seed, rate in enumerate((0.02, 0.05, 0.10), start=10)
        ],
        "many_arms": [
            asdict(simulate_many_arms(arms, 0.05, tests=2_000 // scale, seed=30 + arms)) for arms in (3, 4)
        ],
        "ab": [
            asdict(simulate_peeking(0.05, 0.06, tests=2_000 // scale, horizon=20_000, seed=20)),
            asdict(simulate_peeking(0.02, 0.03, tests=2_000 // scale, horizon=20_000, seed=21)),
        ],
        # Landers' LP CTR: lander views for clicks, LP clicks for conversions.
        "aa_lp_ctr": [
            asdict(simulate_peeking(rate, rate, tests=10_000 // scale, seed=seed))
            for seed, rate in enumerate((0.10, 0.25, 0.40), start=40)
        ],
        "ab_lp_ctr": [
            asdict(simulate_peeking(0.20, 0.24, tests=2_000 // scale, horizon=20_000, seed=50)),
        ],
    }
