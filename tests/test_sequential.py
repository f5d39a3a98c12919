"""The split tests' statistics and smart rotation's, by seeded simulation with known true rates (cheaper
versions of docs/optimisation-rotation.md's figures), asserted with margin: no database."""

from __future__ import annotations

import json
import math
import random

from models.reporting.sequential import (
    ALPHA,
    compare,
    confidence_sequence,
    is_decided,
    judge,
    mixture_ratio,
    naive_z,
    p_value,
)
from models.routing.bandit import BANDIT_CR, BANDIT_EPC, ArmStats, best_probabilities, shares
from workers.bench.rotationsim import binomial, simulate_bandit, simulate_many_arms, simulate_peeking


def test_aa_tests_read_every_100_clicks_name_a_false_winner_at_most_5_percent_of_the_time_unlike_naive_z():
    # 3,000 A/A tests at a 5 % rate, read after every 100 clicks up to 10,000: the sequential test's
    # false-winner rate is ~1 % (5 % allowed; the standard error at 5 % is 0.4 %), the naive test's ~35 %.
    result = simulate_peeking(0.05, 0.05, tests=3_000, seed=5)
    assert result.sequential_rate <= ALPHA
    assert result.naive_rate >= 0.20
    assert result.naive_winners > 5 * result.sequential_winners


def test_an_a_b_c_test_of_equal_arms_judged_as_the_report_judges_names_a_false_winner_rarely():
    assert simulate_many_arms(3, 0.05, tests=1_000, seed=14).false_rate <= ALPHA


def test_the_judgement_puts_the_leader_first_and_names_it_only_once_it_beats_every_arm():
    decided = judge([(5000, 100), (5000, 300), (5000, 120)])
    assert decided.order[0] == 1 and decided.is_winner and decided.pair_alpha == ALPHA / 3
    assert all(pair.difference > 0 for pair in decided.pairs)
    # The leader beats the worst arm but not the runner-up: no winner yet.
    close = judge([(5000, 100), (5000, 300), (5000, 290)])
    assert close.order[:2] == [1, 2] and not close.is_winner
    assert not close.pairs[0].is_decided and close.pairs[1].is_decided
    assert not judge([(100, 5)]).is_winner


def test_aa_tests_at_a_low_rate_hold_the_bound_too():
    # Few conversions are where the normal approximation is weakest.
    assert simulate_peeking(0.01, 0.01, tests=2_000, seed=6).sequential_rate <= ALPHA


def test_a_real_lift_is_found_and_the_winner_named_is_the_better_arm():
    result = simulate_peeking(0.05, 0.08, tests=300, horizon=20_000, seed=7)
    assert result.sequential_winners >= 0.9 * result.tests
    assert result.right_winners == result.sequential_winners


def test_the_bandit_loses_less_than_weighted_rotation_and_converges_to_the_best_offer():
    result = simulate_bandit([0.02, 0.025, 0.035], clicks=20_000, runs=12, seed=8)
    # Weighted rotation loses ~167 conversions here, the bandit ~40.
    assert result.regret_bandit < 0.5 * result.regret_weighted
    assert result.conversions_bandit > result.conversions_weighted
    # 90 % of clicks are the bandit's to give, 3.3 % is the best offer's exploration share.
    assert result.best_share_final >= 0.8
    assert result.best_share_last_fifth >= 0.8


def test_without_evidence_the_mixture_ratio_says_none():
    assert mixture_ratio(0, 0, 100, 5) == 1.0
    assert mixture_ratio(100, 0, 100, 0) == 1.0  # No conversion yet.
    assert p_value(1000, 50, 1000, 50) == 1.0  # Equal rates: the ratio is below 1.


def test_the_mixture_ratio_is_the_normal_mixture_of_the_pooled_z():
    clicks_a, conversions_a, clicks_b, conversions_b, phi = 4000, 200, 4000, 260, 0.0025
    z = naive_z(clicks_a, conversions_a, clicks_b, conversions_b)
    nu = 2 / 4000
    expected = math.sqrt(nu / (nu + phi)) * math.exp(phi * z * z / (2 * (nu + phi)))
    assert math.isclose(mixture_ratio(clicks_a, conversions_a, clicks_b, conversions_b, phi), expected)


def test_a_decisive_difference_is_decided_with_a_confidence_sequence_that_excludes_zero():
    pair = compare(5000, 100, 5000, 250)  # 2 % against 5 %.
    assert pair.is_decided and pair.p_value < 1e-6
    assert 0 < pair.low < pair.difference < pair.high
    # A huge test does not overflow.
    assert compare(10**8, 10**6, 10**8, 2 * 10**6).p_value < 1e-12
    assert is_decided(10**8, 10**6, 10**8, 2 * 10**6)


def test_too_few_conversions_decide_nothing_whatever_the_ratio():
    assert not is_decided(20, 0, 20, 4)
    assert not compare(20, 0, 20, 4).is_decided


def test_the_confidence_sequence_covers_the_true_difference_at_every_read_in_most_tests():
    rng = random.Random(9)
    missed = 0
    tests = 400
    for _ in range(tests):
        clicks = a = b = 0
        for _ in range(50):
            clicks += 100
            a += binomial(rng, 100, 0.04)
            b += binomial(rng, 100, 0.06)
            low, high = confidence_sequence(clicks, a, clicks, b)
            if not low <= 0.02 <= high:
                missed += 1
                break
    assert missed / tests <= ALPHA


def test_binomial_draws_have_the_binomial_mean():
    rng = random.Random(10)
    draws = [binomial(rng, 50, 0.05) for _ in range(20_000)]
    assert abs(sum(draws) / len(draws) - 2.5) < 0.05
    assert binomial(rng, 10, 1.0) == 10 and binomial(rng, 10, 0.0) == 0
    assert abs(sum(binomial(rng, 10, 0.9) for _ in range(5000)) / 5000 - 9.0) < 0.05


def test_shares_keep_the_exploration_floor_and_add_up_to_one():
    rng = random.Random(11)
    arms = [ArmStats(1, 5000, 50, 0.0), ArmStats(2, 5000, 250, 0.0), ArmStats(3, 5000, 100, 0.0)]
    probabilities = best_probabilities(arms, BANDIT_CR, rng)
    assert probabilities[2] > 0.99
    arm_shares = shares(probabilities, 0.10)
    assert math.isclose(sum(arm_shares.values()), 1.0)
    assert min(arm_shares.values()) >= 0.10 / 3 - 1e-9
    assert arm_shares[2] > 0.9


def test_epc_prefers_the_arm_that_earns_more_per_click_not_the_one_that_converts_more():
    rng = random.Random(12)
    arms = [ArmStats(1, 5000, 250, 250 * 1.0), ArmStats(2, 5000, 100, 100 * 10.0)]  # EPC 0.05 vs 0.20.
    assert best_probabilities(arms, BANDIT_EPC, rng)[2] > 0.99
    assert best_probabilities(arms, BANDIT_CR, rng)[1] > 0.99


def test_an_arm_without_clicks_gets_explored():
    rng = random.Random(13)
    arms = [ArmStats(1, 2000, 40, 0.0), ArmStats(2, 0, 0, 0.0)]
    assert best_probabilities(arms, BANDIT_CR, rng)[2] > 0.5  # Beta(1, 1) against ~2 %.


def test_lanner_bench_smart_rotation_prints_and_writes_its_figures(env, tmp_path):
    from conftest import run_lanner

    out = tmp_path / "sim.json"
    printed = run_lanner(env, "bench", "smart-rotation", "--quick", "--json", str(out)).stdout
    assert "regret_bandit" in printed and "sequential_rate" in printed
    figures = json.loads(out.read_text())
    assert [row["tests"] for row in figures["aa"]] == [500, 500, 500]
    assert all(row["sequential_rate"] <= ALPHA < row["naive_rate"] for row in figures["aa"])
    # Landers' LP CTR (10-40 %): the same bound, the same naive failure.
    assert [row["rate_a"] for row in figures["aa_lp_ctr"]] == [0.10, 0.25, 0.40]
    assert all(row["sequential_rate"] <= ALPHA < row["naive_rate"] for row in figures["aa_lp_ctr"])
    assert figures["ab_lp_ctr"][0]["right_winners"] == figures["ab_lp_ctr"][0]["sequential_winners"] > 0
    assert all(row["regret_bandit"] < row["regret_weighted"] for row in figures["bandit"])
