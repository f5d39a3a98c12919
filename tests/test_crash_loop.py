"""The crash loop (`lanner bench faults --crash-loop`): SIGKILLs of random Lanner processes under a steady
click load, then every 302 reconciled against the click table, integrity_check and the rollups recounted;
and the reconciliation's own failures (a lost subid, a duplicate, a phantom) reported, never hidden."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import TEST_COUNTRY_DATABASE

from workers.bench.crashloop import CrashLoopResult, check, reconcile, rollup_mismatches, run_crash_loop
from workers.bench.harness import ROOT


@pytest.mark.long
def test_twenty_kills_lose_nothing_duplicate_nothing_and_keep_the_rollups_exact(tmp_path):
    # Where run_crash_loop looks for the country database it built: `lanner geo build` costs ~3.5 s of CPU.
    shutil.copyfile(TEST_COUNTRY_DATABASE, tmp_path / "country.mmdb")
    result = run_crash_loop(tmp_path, kills=20, seed=7, rate=60, kill_every=0.4)
    summary = result.to_json()
    assert sum(result.kills_by_kind.values()) == 20, summary
    assert result.redirects > 0, summary
    assert result.lost == 0 and result.duplicated == 0 and result.phantom == 0, summary
    assert result.stored == result.redirects + result.unanswered, summary
    assert result.status_500 == 0 and result.problems == [], summary
    assert result.integrity == "ok" and result.rollups == "ok", summary
    assert result.is_met, summary

    # The same checks on a copy of that database, with one click deleted (its 302 now lost) and one
    # rollup row a click too high: both reported.
    database = tmp_path / "copy.db"
    source = sqlite3.connect(tmp_path / "crash-loop" / "data" / "lanner.db")
    with sqlite3.connect(database) as target:
        source.backup(target)
    source.close()
    with sqlite3.connect(database) as connection:
        connection.execute(
            "UPDATE rollup_day SET clicks = clicks + 1 WHERE period = (SELECT min(period) FROM rollup_day)"
        )
        mismatches = rollup_mismatches(connection)
        assert len(mismatches) == 1 and mismatches[0].startswith("rollup_day period"), mismatches
        connection.execute(
            "UPDATE rollup_day SET clicks = clicks - 1 WHERE period = (SELECT min(period) FROM rollup_day)"
        )
        subid, tag = connection.execute("SELECT subid, sub_id_1 FROM click ORDER BY id LIMIT 1").fetchone()
        answers = list(connection.execute("SELECT sub_id_1, subid FROM click"))
        connection.execute("DELETE FROM click WHERE subid = ?", (subid,))
    damaged = CrashLoopResult(kills=0, seed=0, rate=0, kill_every=0)
    check(damaged, database, answers, [])
    assert damaged.lost == 1 and damaged.examples["lost"] == [subid], damaged
    assert damaged.rollups != "ok"  # Its rollups now count a click the table lacks.
    assert not damaged.is_met
    shutil.rmtree(tmp_path / "crash-loop", ignore_errors=True)


@pytest.mark.long
def test_kills_of_postgres_and_redis_in_cluster_mode_lose_nothing(tmp_path):
    from workers.bench.servers import postgres_bindir

    if postgres_bindir() is None or shutil.which("redis-server") is None:
        pytest.skip("cluster mode needs PostgreSQL and redis-server (`make test-deps`)")
    shutil.copyfile(TEST_COUNTRY_DATABASE, tmp_path / "country.mmdb")
    result = run_crash_loop(tmp_path, kills=24, seed=11, rate=40, kill_every=0.5, cluster=True)
    summary = result.to_json()
    assert sum(result.kills_by_kind.values()) == 24, summary
    assert result.kills_by_kind["postgres"] > 0 and result.kills_by_kind["redis"] > 0, summary
    assert result.redirects > 0, summary
    assert result.lost == 0 and result.duplicated == 0 and result.phantom == 0, summary
    assert result.stored == result.redirects + result.unanswered, summary
    assert result.status_500 == 0 and result.problems == [], summary
    assert result.integrity == "ok" and result.rollups == "ok", summary
    assert result.is_met, summary


def test_reconciliation_reports_a_lost_subid():
    found = reconcile([("1", "a"), ("2", "b")], [], [("a", "1")])
    assert found.lost == ["b"] and not found.is_clean


def test_reconciliation_reports_one_subid_answered_to_two_requests():
    found = reconcile([("1", "a"), ("2", "a")], [], [("a", "1")])
    assert found.duplicated == ["a"] and not found.is_clean


def test_reconciliation_reports_one_request_stored_as_two_clicks():
    found = reconcile([("1", "a")], [], [("a", "1"), ("b", "1")])
    assert "request 1" in found.duplicated and not found.is_clean
    assert found.phantom == ["b"]  # And the second row is explained by no 302.


def test_reconciliation_reports_a_subid_stored_twice():
    found = reconcile([("1", "a")], [], [("a", "1"), ("a", "1")])
    assert "a" in found.duplicated and not found.is_clean


def test_a_stored_click_no_request_explains_is_a_phantom():
    found = reconcile([("1", "a")], ["2"], [("a", "1"), ("z", "99")])
    assert found.phantom == ["z"] and found.unanswered == [] and not found.is_clean


def test_a_stored_click_whose_request_got_no_302_is_counted_apart_and_allowed():
    found = reconcile([("1", "a")], ["2"], [("a", "1"), ("b", "2")])
    assert found.unanswered == ["b"] and found.phantom == [] and found.is_clean


def test_crash_loop_runs_alone():
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "faults", "--crash-loop", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--crash-loop runs alone" in result.stderr, result.stderr


def test_cluster_goes_with_the_crash_loop():
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "faults", "--cluster", "--only", "kill-all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--cluster goes with --crash-loop" in result.stderr, result.stderr
