"""Pruning old clicks keeps report totals (the rollups) and refuses what would break uniqueness or reports."""

from __future__ import annotations

import time

import pytest

from models.migrations.deferred import ROLLUP_BACKFILL, run_deferred
from models.ops.retention import RetentionError, parse_age, prune_clicks
from models.reporting.reports import ReportQuery, run_report
from workers.bench.generate import generate_clicks

DAY_MS = 86_400_000


def backfill_pending(db) -> None:
    """The rollup backfill as 0004 leaves a SQLite database (PostgreSQL's baseline has it done at once)."""
    db.connection().execute(
        "UPDATE deferred_step SET state = 'pending', finished_at = NULL WHERE name = ?", (ROLLUP_BACKFILL,)
    )


def test_prune_deletes_old_clicks_and_keeps_report_totals(db):
    now = int(time.time() * 1000)
    generate_clicks(db, 4000, 40, campaigns=3, seed=9, end_ms=now)
    run_deferred(db)
    before = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time"))
    old_clicks = "SELECT COUNT(*) FROM click WHERE created_at < ?"
    old = db.connection().execute(old_clicks, (now - 30 * DAY_MS,)).fetchone()[0]
    assert 0 < old < 4000
    progress = []
    deleted = prune_clicks(
        db,
        parse_age("30d"),
        global_uniqueness_hours=24,
        now_ms=now,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert deleted == old and progress[-1] == (old, old)
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 4000 - old
    after = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time"))
    assert after.rows == before.rows and after.total["clicks"] == 4000
    assert prune_clicks(db, parse_age("30d"), global_uniqueness_hours=24, now_ms=now) == 0


def test_prune_refuses_a_window_uniqueness_needs_and_unfinished_rollups(db):
    with pytest.raises(RetentionError, match="uniqueness window"):
        prune_clicks(db, parse_age("36h"), global_uniqueness_hours=24)
    backfill_pending(db)
    with pytest.raises(RetentionError, match="backfill has not finished"):
        prune_clicks(db, parse_age("90d"), global_uniqueness_hours=24)


@pytest.mark.parametrize("text", ["90", "d", "-3d", "3y", ""])
def test_bad_ages_are_refused(text):
    with pytest.raises(RetentionError):
        parse_age(text)


def test_prune_command(db, lanner):
    backfill_pending(db)
    lanner("generate", "clicks", "--count", "300", "--days", "20", "--campaigns", "2", "--seed", "2")
    refused = lanner("prune", "--older-than", "10d", "--yes", check=False)
    assert refused.returncode != 0 and "run-deferred" in refused.stderr
    lanner("db", "run-deferred")
    out = lanner("prune", "--older-than", "10d", "--yes").stdout
    assert "LANNER_RAW_RETENTION is 30 days: the worker deletes raw clicks older than that once" in out
    # No history yet: every deleted click is gone for good, and it says so.
    deleted = int(out.split("Deleted ")[-1].split(" clicks")[0].replace(",", ""))
    assert deleted > 0 and f"; {deleted:,} of them were not in the click history" in out


def test_a_report_that_needs_pruned_raw_clicks_says_why_instead_of_an_empty_table(db, lanner):
    """Asia/Kolkata's local days start at 18:30 UTC: the hourly rollups cannot cut them, raw clicks can."""
    import falcon
    import falcon.testing

    from models.conversions.postbacks import read_secret
    from models.reporting.reports import PrunedRangeError
    from routes.api import ReportApiResource

    now = int(time.time() * 1000)
    generate_clicks(db, 2000, 20, campaigns=2, seed=4, end_ms=now)
    run_deferred(db)
    day_report = ReportQuery(group_by=("day",), timezone="Asia/Kolkata", preset="all_time")
    assert sum(row["clicks"] for row in run_report(db, day_report).rows) == 2000
    assert prune_clicks(db, parse_age("10d"), global_uniqueness_hours=24, now_ms=now) > 0
    with pytest.raises(PrunedRangeError) as refused:
        run_report(db, day_report)
    message = str(refused.value)
    assert "were pruned" in message and "Asia/Kolkata" in message and "half past" in message
    start = message.split("Start the range at ")[1].split(" ")[0]
    # From the suggested start on, raw clicks are all there: the answer is the rollups' own.
    answered = run_report(db, ReportQuery(group_by=("day",), timezone="Asia/Kolkata", since=start))
    by_campaign = run_report(db, ReportQuery(timezone="Asia/Kolkata", since=start, source="raw"))
    assert answered.rows and answered.total["clicks"] == by_campaign.total["clicks"] > 0
    # Whole UTC hours and days are the rollups' and stay answerable: UTC and Berlin day reports.
    for zone in ("UTC", "Europe/Berlin"):
        rows = run_report(db, ReportQuery(group_by=("day",), timezone=zone, preset="all_time")).rows
        assert sum(row["clicks"] for row in rows) == 2000
    with pytest.raises(PrunedRangeError, match="sub_id_1"):
        run_report(db, ReportQuery(group_by=("sub_id_1",), preset="all_time"))

    cli = lanner("report", "-g", "day", "--timezone", "Asia/Kolkata", "--preset", "all_time", check=False)
    assert cli.returncode == 1 and "were pruned" in cli.stderr and cli.stdout == ""
    app = falcon.App()
    app.add_route("/api/report", ReportApiResource(db))
    answer = falcon.testing.TestClient(app).simulate_get(
        "/api/report",
        params={"group": "day", "timezone": "Asia/Kolkata", "preset": "all_time"},
        headers={"X-Api-Key": read_secret(db, "api_key")},
    )
    assert answer.status_code == 422 and "were pruned" in answer.json["description"]
