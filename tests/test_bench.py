"""The bench harness end to end at toy sizes: real k6, real server and worker, real database."""

from __future__ import annotations

import json
import subprocess

from conftest import LANNER, ROOT


def test_bench_migration_upgrades_a_live_database_and_accounts_for_every_click(tmp_path, env):
    out = tmp_path / "rehearsal.json"
    args = [
        "bench", "migration", "--clicks", "6000", "--recent", "2000", "--rate", "40", "--seconds", "12",
        "--data-dir", str(tmp_path / "rehearsal"), "--json", str(out),
    ]  # fmt: skip
    result = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["is_complete"] and report["migration"] == "0005_visitor_key"
    assert report["settings"]["pre_upgrade_schema"] == "0004_rollups"
    assert report["database"]["clicks"] == 6000
    # The recent part spans exactly the 24 h before it was generated; a few seconds have passed.
    assert 1900 < report["database"]["clicks_last_24h"] <= 2000
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["visitor_key_backfill"]["state"] == "done"
    assert steps["visitor_key_backfill"]["units"] == 6000
    assert steps["visitor_key_index"]["state"] == "done"
    assert steps["click_visitor_drop"]["state"] == "pending"  # Waits out its grace period.
    load = report["load"]
    assert load["accepted"] > 0 and load["logged"] == load["accepted"]
    assert (load["lost"], load["duplicated"], load["errors"]) == (0, 0, 0)
    assert set(report["probes_us"]) == {"new", "returning", "nat"}
    assert "Upgrade to 0005_visitor_key on 6,000 clicks" in result.stdout

    # A second run reuses the pre-upgrade database: the same clicks, upgraded again from a copy.
    again = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Building the pre-upgrade database" not in again.stderr
    assert json.loads(out.read_text())["database"]["clicks"] == 6000


def test_judge_says_which_targets_a_run_missed_and_by_how_much():
    from workers.bench.harness import BenchReport, StepResult
    from workers.bench.suite import SUITE_SCENARIOS, judge

    def step(
        rate: int, accepted_per_s: float, p99_ms: float, lost: int = 0, rss: float = 150.0
    ) -> StepResult:
        result = StepResult("lanner", rate, 60, 10, 100, accepted_per_s=accepted_per_s, p99_ms=p99_ms)
        result.lost, result.duplicated, result.peak_rss_mb = lost, 0, rss
        return result

    failing = step(4000, 3500.0, 300.0)
    failing.errors = 7
    report = BenchReport(
        lanner=[step(2000, 2000.0, 106.5), step(3000, 2990.5, 150.0, lost=2, rss=231.0), failing]
    )
    verdicts = {v.target: v for v in judge(SUITE_SCENARIOS["unique"], report)}
    assert not verdicts["no lost click"].is_met and verdicts["no lost click"].miss == "2 lost over"
    assert verdicts["no duplicated click"].is_met
    assert verdicts["p99 at 2,000/s <= 100 ms"].miss == "6.5 ms over"
    # Capacity counts only steps served whole: the 3,000/s step lost clicks, the 4,000/s one erred.
    assert verdicts["3,000/s accepted (best error-free step)"].miss == "1000 /s short"
    assert verdicts["peak RSS of all Lanner processes <= 200 MB"].miss == "31 MB over"

    capacity = BenchReport(lanner=[step(3000, 2958.6, 150.0), step(4000, 3691.3, 320.0)])
    verdicts = {v.target: v for v in judge(SUITE_SCENARIOS["unique"], capacity)}
    assert verdicts["3,000/s accepted (best error-free step)"].measured == "3691.3 /s"
    assert verdicts["3,000/s accepted (best error-free step)"].is_met

    sustained = BenchReport(lanner=[step(2000, 1995.0, 40.0)])
    (lost, duplicated, holds) = judge(SUITE_SCENARIOS["sustained"], sustained)
    assert holds.is_met and holds.target == "holds 2000/s for 60 s (99 %)"


def test_bench_idle_measures_every_lanner_process_at_rest(tmp_path, env):
    out = tmp_path / "idle.json"
    args = ["bench", "idle", "--seconds", "3", "--data-dir", str(tmp_path / "idle"), "--json", str(out)]
    result = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    idle = json.loads(out.read_text())["report"]
    # Master, two web workers and the Huey consumer (the admin worker starts on demand).
    assert idle["processes"] == 4
    assert idle["seconds"] >= 3 and idle["rss_mb"] > 0 and idle["pss_mb"] > 0
    # The verdict printed is the one measured: `idle CPU <= 1 % of one core: 0.33 %`.
    assert f"idle CPU <= 1 % of one core: {idle['cpu_percent_of_one_core']:g} %" in result.stdout


def test_bench_compare_runs_two_revisions_on_copies_of_one_database(tmp_path, env):
    out = tmp_path / "compare.json"
    args = [
        "bench", "compare", "HEAD", "HEAD", "--rates", "40", "--step-seconds", "3", "--rounds", "1",
        "--prefill", "2000", "--data-dir", str(tmp_path / "compare"), "--json", str(out),
    ]  # fmt: skip
    result = subprocess.run([*LANNER, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    compared = json.loads(out.read_text())
    assert [(run["revision"], run["round"]) for run in compared["runs"]] == [("HEAD", 1), ("HEAD", 1)]
    for run in compared["runs"]:
        (step,) = run["report"]["lanner"]
        assert step["accepted"] > 0 and (step["lost"], step["duplicated"]) == (0, 0)
        assert run["report"]["settings"]["db_clicks_before"] >= 2000  # The copy of the prefilled database.
    (row,) = compared["ratios"]
    assert row["rate"] == 40 and row["accepted_per_s"] is not None
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True)
    assert "lanner-compare-" not in worktrees.stdout  # Removed afterwards.
