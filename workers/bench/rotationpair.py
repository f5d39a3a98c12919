"""`lanner bench bandit-clicks`: the click ladder on a bandit stream against a weighted one, as ratios.

Issue 31's target is "the click bench with a bandit stream at ≥ 0.97 of a weighted stream's accepted
rate". Each round runs `lanner bench clicks --scenario weighted` and `--scenario bandit` (workers/bench/
harness.py: one stream of three offers, by weight or by bandit_cr shares) on one data dir, so both
serve the same database; the order alternates round by round (weighted first, then bandit first, ...) so
the machine's drift hits both. Per rate, each round's bandit / weighted ratio of the accepted rate
(302s with a subid a second), of the server's CPU per click and of the latencies; the figures are the
medians over rounds. Every 302's subid is reconciled with the database as in any ladder.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

from workers.bench.harness import BenchOptions, BenchReport, Reporter, run_bench, run_work_dir

SIDES = ("weighted", "bandit")
RATIO_FIELDS = ("accepted_per_s", "server_cpu_us_per_click", "p50_ms", "p99_ms")


def ratios(runs: list[dict]) -> list[dict]:
    """Per rate: each field's bandit / weighted value of the same round, as the median over rounds
    (with the rounds' ratios, and each side's median value, beside it)."""
    by_round: dict[tuple[int, str], dict[int, dict]] = {
        (run["round"], run["side"]): {step["rate"]: step for step in run["steps"]} for run in runs
    }
    rounds = sorted({run["round"] for run in runs})
    rates = sorted({rate for steps in by_round.values() for rate in steps})
    table = []
    for rate in rates:
        row: dict = {"rate": rate}
        for name in RATIO_FIELDS:
            values = []
            for number in rounds:
                weighted = by_round.get((number, "weighted"), {}).get(rate, {}).get(name)
                bandit = by_round.get((number, "bandit"), {}).get(rate, {}).get(name)
                if weighted and bandit is not None:
                    values.append(round(bandit / weighted, 3))
            row[name] = round(statistics.median(values), 3) if values else None
            row[f"{name}_rounds"] = values
        for side in SIDES:
            accepted = [
                steps[rate]["accepted_per_s"]
                for (_, run_side), steps in by_round.items()
                if run_side == side and rate in steps
            ]
            row[f"{side}_accepted_per_s"] = round(statistics.median(accepted), 1) if accepted else None
        table.append(row)
    return table


def run_rotation_pair(options: BenchOptions, rounds: int, reporter: Reporter) -> dict:
    """`rounds` × (weighted, bandit) ladders of `options` (its scenario ignored) on one data dir; the
    runs (each side's steps) and the ratios. A lost or duplicated click stops nothing: it is in the steps."""
    runs: list[dict] = []
    with run_work_dir("lanner-bandit-pair-", options.keep_files, reporter) as work_dir:
        data_dir = options.data_dir or work_dir / "var"
        for number in range(1, rounds + 1):
            order = SIDES if number % 2 else tuple(reversed(SIDES))
            for side in order:
                reporter.message(f"Round {number}/{rounds}: {side} stream ...")
                report = BenchReport()
                run_bench(
                    replace(options, scenario=side, data_dir=Path(data_dir), is_nginx_baseline=False),
                    report,
                    reporter,
                )
                runs.append(
                    {"round": number, "side": side, "steps": [step.__dict__ for step in report.lanner]}
                )
    return {"runs": runs, "ratios": ratios(runs), "rounds": rounds, "rates": options.rates}


def format_pair(result: dict) -> list[str]:
    """The ratios as a table: bandit / weighted, median over rounds."""
    lines = ["bandit / weighted stream, median over rounds (accepted: 302s with a subid a second):"]
    header = ["rate", "weighted acc/s", "bandit acc/s", "accepted", "rounds", "cpu/click", "p50", "p99"]
    rows = [
        [
            str(row["rate"]),
            f"{row['weighted_accepted_per_s']}",
            f"{row['bandit_accepted_per_s']}",
            f"{row['accepted_per_s']}",
            " ".join(f"{value:g}" for value in row["accepted_per_s_rounds"]),
            f"{row['server_cpu_us_per_click']}",
            f"{row['p50_ms']}",
            f"{row['p99_ms']}",
        ]
        for row in result["ratios"]
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for cells in (header, *rows):
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)))
    return lines
