"""A split test's verdict that stays valid however often it is looked at: the mixture SPRT of two rates.

A fixed-horizon z-test is right once, at the sample size chosen before the test; a buyer who looks
after every 100 clicks and stops at the first |z| > 1.96 picks a false winner far more often than 5 %
(docs/optimisation-rotation.md measures it). The mixture sequential probability ratio test (Johari,
Koomen, Pekelis, Walsh 2017, "Peeking at A/B tests", the normal-mixture boundary of Howard et al. 2021)
mixes the likelihood ratio over a prior on the effect; that mixture is a martingale under "no
difference", so by Ville's inequality the chance that it EVER reaches 1/alpha is at most alpha, and
1/ratio is an always-valid p-value: it may be read after every click.

Here the two rates' difference is standardised by the pooled rate's spread (the two-proportion z of the
pooled test), so the one tuning constant, PHI, is the prior variance of the effect in units of that
spread (a standardised effect, squared), chosen by simulation (docs/optimisation-rotation.md): 0.0025
is about the squared effect of a 50 % lift on a 1 % rate (or 25 % on 4 %). A larger one finds big lifts
sooner and holds the false-winner rate less far under alpha (~3 % at 0.01), a smaller one the other way
round (~1 % at 0.001, a 50 % lift on 2 % found after ~9,400 clicks instead of ~7,900). The normal
approximation wants a few conversions: below MIN_CONVERSIONS in both arms (and twice that in neither)
the answer is "no winner yet" whatever the numbers.

The confidence sequence of the difference (the same mixture, inverted, with each arm's own variance) is
reported beside the p-value: an interval that covers the true difference at every look at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05
PHI = 0.0025
MIN_CONVERSIONS = 5  # In each arm of a pair, before the normal approximation is trusted.


@dataclass(frozen=True)
class Pair:
    """One arm against another: B's rate minus A's, its always-valid p-value and confidence sequence."""

    difference: float  # rate_b - rate_a
    p_value: float  # Always valid: P(it ever gets this low | equal rates) <= itself.
    low: float  # The confidence sequence at 1 - alpha: covers the true difference at every look.
    high: float
    is_decided: bool  # p_value <= alpha (with enough conversions on both sides).


def mixture_ratio(
    clicks_a: int, conversions_a: int, clicks_b: int, conversions_b: int, phi: float = PHI
) -> float:
    """The mixture likelihood ratio of "the rates differ" against "they are equal" (1.0: no evidence)."""
    if clicks_a <= 0 or clicks_b <= 0:
        return 1.0
    pooled = (conversions_a + conversions_b) / (clicks_a + clicks_b)
    spread = pooled * (1.0 - pooled)
    if spread <= 0.0:  # No conversion at all, or nothing but: no difference can show.
        return 1.0
    nu = 1.0 / clicks_a + 1.0 / clicks_b
    z2 = (conversions_b / clicks_b - conversions_a / clicks_a) ** 2 / (spread * nu)
    # In logs: a decisive test (z in the hundreds) would overflow exp().
    log_ratio = 0.5 * math.log(nu / (nu + phi)) + phi * z2 / (2.0 * (nu + phi))
    return math.exp(min(log_ratio, 700.0))


def p_value(clicks_a: int, conversions_a: int, clicks_b: int, conversions_b: int, phi: float = PHI) -> float:
    """The always-valid p-value of "the two rates are equal", now."""
    return min(1.0, 1.0 / mixture_ratio(clicks_a, conversions_a, clicks_b, conversions_b, phi))


def confidence_sequence(
    clicks_a: int,
    conversions_a: int,
    clicks_b: int,
    conversions_b: int,
    alpha: float = ALPHA,
    phi: float = PHI,
) -> tuple[float, float]:
    """Bounds on rate_b - rate_a that hold at every look at once, with probability 1 - alpha."""
    if clicks_a <= 0 or clicks_b <= 0:
        return -1.0, 1.0
    rate_a, rate_b = conversions_a / clicks_a, conversions_b / clicks_b
    pooled = (conversions_a + conversions_b) / (clicks_a + clicks_b)
    # Each arm's own variance, floored by a quarter conversion so a 0 % arm is not certain of itself.
    variance = sum(
        max(rate * (1.0 - rate), 0.25 / clicks) / clicks
        for rate, clicks in ((rate_a, clicks_a), (rate_b, clicks_b))
    )
    tau2 = phi * max(pooled * (1.0 - pooled), 0.25 / (clicks_a + clicks_b))
    half = math.sqrt(
        variance
        * (variance + tau2)
        / tau2
        * (2.0 * math.log(1.0 / alpha) + math.log((variance + tau2) / variance))
    )
    difference = rate_b - rate_a
    return max(-1.0, difference - half), min(1.0, difference + half)


def compare(
    clicks_a: int,
    conversions_a: int,
    clicks_b: int,
    conversions_b: int,
    alpha: float = ALPHA,
    phi: float = PHI,
) -> Pair:
    """B against A at level `alpha` (already divided by the number of pairs an A/B/n test compares)."""
    conversions_a, conversions_b = min(conversions_a, clicks_a), min(conversions_b, clicks_b)
    p = p_value(clicks_a, conversions_a, clicks_b, conversions_b, phi)
    low, high = confidence_sequence(clicks_a, conversions_a, clicks_b, conversions_b, alpha, phi)
    rate_a = conversions_a / clicks_a if clicks_a else 0.0
    rate_b = conversions_b / clicks_b if clicks_b else 0.0
    return Pair(rate_b - rate_a, p, low, high, _has_enough(conversions_a, conversions_b) and p <= alpha)


def _has_enough(conversions_a: int, conversions_b: int) -> bool:
    # One arm with none yet while the other has many is evidence too; the test's own bound decides.
    return min(conversions_a, conversions_b) >= MIN_CONVERSIONS or max(conversions_a, conversions_b) >= (
        2 * MIN_CONVERSIONS
    )


def is_decided(
    clicks_a: int,
    conversions_a: int,
    clicks_b: int,
    conversions_b: int,
    alpha: float = ALPHA,
    phi: float = PHI,
) -> bool:
    """Whether the rates differ at `alpha`, now: compare()'s verdict without its bounds (the simulation's)."""
    return (
        _has_enough(conversions_a, conversions_b)
        and mixture_ratio(clicks_a, conversions_a, clicks_b, conversions_b, phi) >= 1.0 / alpha
    )


@dataclass(frozen=True)
class Judgement:
    """An A/B/n test's verdict: the leader against every other arm."""

    order: list[int]  # Arm indices, the leader (best rate, then most clicks) first.
    pair_alpha: float  # alpha over the number of pairs of the test.
    pairs: list[Pair]  # The leader against order[1], order[2]...: the leader's rate minus the arm's.
    is_winner: bool  # The leader beats every other arm.


def judge(arms: Sequence[tuple[int, int]], alpha: float = ALPHA, phi: float = PHI) -> Judgement:
    """The verdict over arms given as (clicks, conversions), each with clicks.

    Each pair is tested at alpha / (number of pairs), Bonferroni: the leader is chosen from the same
    numbers, so the chance that ANY pair of equal arms is ever decided stays within alpha."""
    order = sorted(range(len(arms)), key=lambda i: (-(arms[i][1] / arms[i][0]), -arms[i][0], i))
    count = len(arms) * (len(arms) - 1) // 2
    pair_alpha = alpha / count if count else alpha
    if len(arms) < 2:
        return Judgement(order, pair_alpha, [], False)
    leader_clicks, leader_conversions = arms[order[0]]
    pairs = [compare(*arms[i], leader_clicks, leader_conversions, pair_alpha, phi) for i in order[1:]]
    return Judgement(order, pair_alpha, pairs, all(p.is_decided and p.difference > 0 for p in pairs))


def naive_z(clicks_a: int, conversions_a: int, clicks_b: int, conversions_b: int) -> float:
    """The fixed-horizon pooled two-proportion z (what most trackers' "significance" is): for the
    simulation that shows what peeking does to it."""
    if clicks_a <= 0 or clicks_b <= 0:
        return 0.0
    pooled = (conversions_a + conversions_b) / (clicks_a + clicks_b)
    spread = pooled * (1.0 - pooled) * (1.0 / clicks_a + 1.0 / clicks_b)
    if spread <= 0.0:
        return 0.0
    return (conversions_b / clicks_b - conversions_a / clicks_a) / math.sqrt(spread)
