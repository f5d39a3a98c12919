"""`lanner bench bandit-clicks`'s arithmetic: bandit / weighted of the same round, the median over rounds
(the ladders themselves are k6 runs, too dear for the suite; docs/optimisation-rotation.md has a run)."""

from __future__ import annotations

from workers.bench.rotationpair import format_pair, ratios


def step(rate: int, accepted: float, cpu: float | None = 50.0) -> dict:
    return {
        "rate": rate,
        "accepted_per_s": accepted,
        "server_cpu_us_per_click": cpu,
        "p50_ms": 2.0,
        "p99_ms": 8.0,
    }


def test_ratios_pair_each_round_and_take_the_median_over_rounds():
    runs = [
        {"round": 1, "side": "weighted", "steps": [step(1000, 1000.0), step(3000, 2000.0)]},
        {"round": 1, "side": "bandit", "steps": [step(1000, 1000.0), step(3000, 1900.0)]},
        {"round": 2, "side": "bandit", "steps": [step(1000, 990.0), step(3000, 2100.0, cpu=None)]},
        {"round": 2, "side": "weighted", "steps": [step(1000, 1000.0), step(3000, 2000.0)]},
        {"round": 3, "side": "weighted", "steps": [step(1000, 1000.0), step(3000, 1000.0)]},
        {"round": 3, "side": "bandit", "steps": [step(1000, 1000.0)]},  # A round cut short: no 3000 step.
    ]
    low, high = ratios(runs)
    assert low["rate"] == 1000 and low["accepted_per_s_rounds"] == [1.0, 0.99, 1.0]
    assert low["accepted_per_s"] == 1.0 and low["p99_ms"] == 1.0
    assert high["accepted_per_s_rounds"] == [0.95, 1.05] and high["accepted_per_s"] == 1.0
    assert high["server_cpu_us_per_click_rounds"] == [1.0]  # A missing value pairs with nothing.
    assert (high["weighted_accepted_per_s"], high["bandit_accepted_per_s"]) == (2000.0, 2000.0)
    table = format_pair({"ratios": [low, high]})
    assert table[2].split()[:5] == ["1000", "1000.0", "1000.0", "1.0", "1"]
