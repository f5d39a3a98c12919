"""Pruning old clicks keeps report totals (the rollups) and refuses what would break uniqueness or reports."""

from __future__ import annotations

import time

import pytest

from models.deferred import run_deferred
from models.generate import generate_clicks
from models.reports import ReportQuery, run_report
from models.retention import RetentionError, parse_age, prune_clicks

DAY_MS = 86_400_000


def test_prune_deletes_old_clicks_and_keeps_report_totals(db):
    now = int(time.time() * 1000)
    generate_clicks(db, 4000, 40, campaigns=3, seed=9, end_ms=now)
    run_deferred(db)
    before = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time"))
    old = db.execute_sql("SELECT COUNT(*) FROM click WHERE created_at < ?", (now - 30 * DAY_MS,)).fetchone()[
        0
    ]
    assert 0 < old < 4000
    progress = []
    deleted = prune_clicks(db, parse_age("30d"), global_uniqueness_hours=24, now_ms=now,
                           on_progress=lambda done, total: progress.append((done, total)))  # fmt: skip
    assert deleted == old and progress[-1] == (old, old)
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 4000 - old
    after = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time"))
    assert after.rows == before.rows and after.total["clicks"] == 4000
    assert prune_clicks(db, parse_age("30d"), global_uniqueness_hours=24, now_ms=now) == 0


def test_prune_refuses_a_window_uniqueness_needs_and_unfinished_rollups(db):
    with pytest.raises(RetentionError, match="uniqueness window"):
        prune_clicks(db, parse_age("36h"), global_uniqueness_hours=24)
    with pytest.raises(RetentionError, match="backfill has not finished"):
        prune_clicks(db, parse_age("90d"), global_uniqueness_hours=24)


@pytest.mark.parametrize("text", ["90", "d", "-3d", "3y", ""])
def test_bad_ages_are_refused(text):
    with pytest.raises(RetentionError):
        parse_age(text)


def test_prune_command(lanner):
    lanner("generate", "clicks", "--count", "300", "--days", "20", "--campaigns", "2", "--seed", "2")
    refused = lanner("prune", "--older-than", "10d", "--yes", check=False)
    assert refused.returncode != 0 and "run-deferred" in refused.stderr
    lanner("db", "run-deferred")
    assert "Deleted" in lanner("prune", "--older-than", "10d", "--yes").stdout
