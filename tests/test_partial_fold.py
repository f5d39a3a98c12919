"""Folding closed days' partial rows into one row per key (models/reporting/partials.py): the reports,
the caps and the cubes say the same numbers before, during and after a fold, a fold killed midway
leaves them exact and the next one finishes it, a click landing after its day was folded adds a
partial again, and on PostgreSQL a fold among four landing flushers deadlocks none of them.

Each test lands nodes' spools on one database of each backend and checks against the raw clicks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ROOT, wait_until
from test_flush_locks import BATCH, CLICKS, lock_waits, spools  # noqa: F401 (spools: a fixture)
from test_reports import cube_differences

from models.admin.services import create_campaign, create_offer, update_offer
from models.clicks.node import ensure_spool_node, partial_number
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.migrations.deferred import run_deferred
from models.reporting.partials import closed_through, fold_partials
from models.reporting.reports import ReportQuery, run_report
from models.routing.caps import ClickCounters, cap_usage
from models.store.partials import FOLDED

DAY = 86_400
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 "
    "Safari/537.36",
)
GROUPINGS = [("campaign",), ("offer", "browser"), ("hour", "device"), ("day", "offer", "os")]
NODES = ("main", "node-b", "node-c")


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


def reports(db, since: str, until: str) -> list[list[dict]]:
    """Each grouping's report over the rollups, after checking it against the same report over raw clicks."""
    answers = []
    for group_by in GROUPINGS:
        shape = dict(group_by=group_by, since=since, until=until)
        fast, raw = run_report(db, ReportQuery(**shape)), run_report(db, ReportQuery(source="raw", **shape))
        assert "raw" not in fast.sources and raw.sources == ["raw"]
        assert rows_of(fast) == rows_of(raw), group_by
        answers.append(rows_of(fast))
    assert all(rows == [] for rows in cube_differences(db).values())
    return answers


def partials(db) -> dict[str, set[int]]:
    """table -> the partials its rows are in."""
    return {
        table: {row[0] for row in db.execute_sql(f"SELECT DISTINCT node FROM {table}").fetchall()}
        for table in FOLDED
    }


def partial_rows(db) -> int:
    return sum(
        db.execute_sql(f"SELECT COUNT(*) FROM {table} WHERE node <> 0").fetchone()[0] for table in FOLDED
    )


def total_clicks(db) -> tuple[int, ...]:
    """The clicks stored, and as every folded table sums them."""
    sums = [db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0]]
    for table in FOLDED:
        scope = " WHERE scope = 'offer'" if table == "click_counter" else ""
        sums.append(db.execute_sql(f"SELECT COALESCE(SUM(clicks), 0) FROM {table}{scope}").fetchone()[0])
    return tuple(int(value) for value in sums)


@pytest.fixture
def nodes(db, settings, make_tracker, clock, tmp_path):
    """A campaign with a capped offer and NODES' trackers and spools, the clock four days back (closed:
    a fold at the real time folds it)."""
    run_deferred(db)  # The rollup backfill of an empty database: reports read the rollups from here on.
    clock.now = time.time() - 4 * DAY
    offer = create_offer(db, "Capped", "https://o.example/?s={subid}")
    update_offer(db, offer.id, daily_cap=10_000)
    create_campaign(db, "Parts", "parts", offer_id=offer.id)
    spool_dirs, trackers = [], []
    for name in NODES:
        spool = settings.spool_dir if name == "main" else tmp_path / name / "spool"
        if name != "main":
            ensure_spool_node(spool, name)
        spool_dirs.append(spool)
        trackers.append(make_tracker(spool_dir=spool))

    def land(per_node: int, *, days: int = 1, first: int = 0) -> None:
        start = clock.now
        for day in range(days):
            clock.now = start + day * DAY
            for n, tracker in enumerate(trackers):
                config = tracker.campaign("parts")
                for i in range(first, first + per_node):
                    # The same keys on every node: each node's partial of the same rows.
                    visit = Visit(ip=f"198.51.{n}.{i + 1}", user_agent=AGENTS[i % 3], cost=0.25)
                    tracker.track(config, visit)
        clock.now = start
        for spool in spool_dirs:
            flush_spool(db, spool, settings.spool_segment_bytes)

    return offer.id, trackers, spool_dirs, land


def test_a_fold_leaves_one_row_per_key_with_reports_and_caps_unchanged_and_a_late_click_adds_a_partial(
    db, settings, nodes, clock, lanner
):
    offer_id, trackers, spool_dirs, land = nodes
    land(6, days=2)
    first = datetime.fromtimestamp(clock.now, UTC).date()
    since, until = first.isoformat(), (first + timedelta(days=2)).isoformat()
    before = reports(db, since, until)
    parts = {0, partial_number("node-b"), partial_number("node-c")}
    assert partials(db) == dict.fromkeys(FOLDED, parts)
    totals = total_clicks(db)
    assert totals == (36,) * len(totals)
    counts = ClickCounters()
    counts.load(db.connection(), int(clock.now * 1000))
    usage = cap_usage(db.connection(), "offer", offer_id, "UTC", int(clock.now * 1000))
    assert usage == (18, 36)

    folded = lanner("db", "fold-partials")
    assert "Folded" in folded.stdout and "of 2 day(s)" in folded.stdout, folded.stdout
    assert partials(db) == dict.fromkeys(FOLDED, {0})
    assert reports(db, since, until) == before
    assert total_clicks(db) == totals
    assert cap_usage(db.connection(), "offer", offer_id, "UTC", int(clock.now * 1000)) == usage
    after = ClickCounters()
    after.load(db.connection(), int(clock.now * 1000))
    assert after.days == counts.days
    assert "No partials to fold" in lanner("db", "fold-partials").stdout

    # node-b was down: its click of that day lands after the fold, onto its own partial, and counts.
    trackers[1].track(trackers[1].campaign("parts"), Visit(ip="203.0.113.9", user_agent=AGENTS[0]))
    flush_spool(db, spool_dirs[1], settings.spool_segment_bytes)
    assert partials(db) == dict.fromkeys(FOLDED, {0, partial_number("node-b")})
    late = reports(db, since, until)
    assert late != before and total_clicks(db) == (37,) * len(totals)
    from workers.runtime.tasks import create_huey

    create_huey(settings, immediate=True).fold_partials()  # The six-hourly task, as its consumer runs it.
    assert partials(db) == dict.fromkeys(FOLDED, {0})
    assert reports(db, since, until) == late


def test_only_days_closed_in_every_timezone_past_the_margin_are_folded():
    at = datetime(2026, 12, 5, 11, 59, tzinfo=UTC).timestamp()
    # 4 December ends at 12:00 UTC on the 5th in UTC-12; 12 hours' margin more: midnight on the 6th.
    assert closed_through(at) == closed_through(at + 12 * 3600) == datetime(2026, 12, 3).date()
    assert closed_through(at + 12 * 3600 + 60) == datetime(2026, 12, 4).date()
    assert closed_through(at, margin_hours=0) == datetime(2026, 12, 3).date()
    assert closed_through(at + 120, margin_hours=0) == datetime(2026, 12, 4).date()


# The child that folds, and says so after each committed chunk; with PAUSE set it then waits for a
# line on stdin (to be killed between chunks).
FOLDER = """
import os, sys, time
from settings import load_settings
from models.store.database import db, open_database
from models.reporting.partials import fold_partials

open_database(load_settings(os.environ).database_location)

def said(done, total):
    print(f"{done}/{total}", flush=True)
    if os.environ.get("PAUSE"):
        sys.stdin.readline()

fold_partials(db, time.time(), on_chunk=said)
print("done", flush=True)
"""


def test_a_fold_killed_midway_leaves_the_numbers_exact_and_the_next_one_finishes_it(
    db, backend, env, nodes, clock
):
    _, _, _, land = nodes
    land(3, days=3)
    first = datetime.fromtimestamp(clock.now, UTC).date()
    since, until = first.isoformat(), (first + timedelta(days=3)).isoformat()
    before = reports(db, since, until)
    unfolded = partial_rows(db)
    held = None
    if backend == "postgresql":
        # A row of the last day's detail cube held by another transaction: the fold stops there,
        # inside that chunk's transaction with some of its rows locked, and is killed there.
        from models.store.database import connect

        held = connect(env["LANNER_DATABASE_URL"])
        held.execute_sql("BEGIN")
        last = (
            int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp() * 1000) + 2 * DAY * 1000
        )
        held.execute_sql(
            "SELECT 1 FROM rollup_day WHERE period = %s AND node <> 0 ORDER BY os DESC LIMIT 1 FOR UPDATE",
            (last,),
        ).fetchall()
    child = subprocess.Popen(
        [sys.executable, "-c", FOLDER],
        env={**env, "PAUSE": "1" if held is None else ""},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        said = child.stdout.readline()
        assert said.startswith("1/"), said
        if held is not None:
            waiting = (
                "SELECT pid FROM pg_locks JOIN pg_stat_activity USING (pid) "
                "WHERE NOT granted AND datname = current_database()"
            )
            (pid,) = wait_until(
                lambda: held.execute_sql(waiting).fetchone(), 60, "the fold's wait on the row"
            )
            # A reader meanwhile: two days folded, the third partly locked, the sums the same.
            assert reports(db, since, until) == before
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
        if held is not None:
            held.execute_sql("ROLLBACK")
            gone = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = %s"
            wait_until(lambda: held.execute_sql(gone, (pid,)).fetchone() == (0,), 60, "the killed fold's end")
            held.close()
    assert reports(db, since, until) == before
    # Killed midway: the chunks it committed folded, the rest still in their partials.
    assert 0 < partial_rows(db) < unfolded
    assert total_clicks(db) == (27,) * (len(FOLDED) + 1)

    result = fold_partials(db, time.time())
    assert result.chunks and partials(db) == dict.fromkeys(FOLDED, {0})
    assert reports(db, since, until) == before


def test_a_fold_among_four_landing_flushers_on_postgresql_deadlocks_none_and_keeps_the_totals(
    postgres_server,
    spools,  # noqa: F811 (test_flush_locks.py's fixture, imported above)
    clock,
):
    """test_flush_locks.py's four spools of one campaign landing at once, batch by batch, while a fold
    of their day runs over and over: a flusher adds onto rows the fold holds and the fold locks rows a
    flusher holds (late clicks of a day being folded), each in the one order, so they wait, never
    deadlock; every click is counted once."""
    from models.store.database import db

    campaign_id, dirs = spools
    folded_once = threading.Event()
    landing = threading.Event()
    errors: list[BaseException] = []
    folds: list[int] = []
    log_before = len(postgres_server.log())

    def logged() -> None:
        db.execute_sql("SET deadlock_timeout = '1ms'").close()
        db.execute_sql("SET log_lock_waits = on").close()

    def flush(spool) -> None:
        def first_batch_then_the_fold(result) -> None:
            # After a first commit each: the fold has partials to fold while the rest lands.
            if not folded_once.wait(timeout=120):
                raise AssertionError("no fold of the first batches")

        try:
            logged()
            flush_spool(db, spool, 64 << 20, batch_size=BATCH, on_batch=first_batch_then_the_fold)
        except BaseException as error:
            errors.append(error)
        finally:
            db.close()

    def fold() -> None:
        try:
            logged()
            while landing.is_set():
                result = fold_partials(db, clock.now + 3 * DAY)
                folds.append(result.rows)
                if result.rows:
                    folded_once.set()
        except BaseException as error:
            errors.append(error)
            folded_once.set()
        finally:
            db.close()

    landing.set()
    threads = [threading.Thread(target=flush, args=(spool,)) for spool in dirs]
    folder = threading.Thread(target=fold)
    for thread in [*threads, folder]:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    landing.clear()
    folder.join(timeout=300)
    assert not errors, errors
    log = postgres_server.log()[log_before:]
    assert "deadlock detected" not in log
    waits = lock_waits(log)
    print(
        f"{len(folds)} folds ({sum(1 for rows in folds if rows)} with rows), "
        f"{len(waits)} lock waits past 1 ms: {set(waits)}"
    )
    # A fold's wait is logged on its SELECT ... FOR UPDATE ("?": no write); a flusher's on its upsert.
    assert {kind for kind, _ in waits} <= {"transaction", "tuple", "extension"}, waits
    assert {table for _, table in waits} <= {"?", "click_counter", *FOLDED}, waits
    assert sum(1 for rows in folds if rows) >= 1

    total = len(dirs) * CLICKS
    assert total_clicks(db) == (total,) * (len(FOLDED) + 1)
    fold_partials(db, clock.now + 3 * DAY)
    assert partials(db) == dict.fromkeys(FOLDED, {0})
    assert total_clicks(db) == (total,) * (len(FOLDED) + 1)
    day = datetime.fromtimestamp(clock.now, UTC).date()
    shape = dict(group_by=("stream", "offer", "browser"), since=str(day), until=str(day + timedelta(days=1)))
    fast, raw = run_report(db, ReportQuery(**shape)), run_report(db, ReportQuery(source="raw", **shape))
    assert fast.sources == ["rollup_day"] and fast.rows == raw.rows and fast.total["clicks"] == total
    assert (
        db.execute_sql("SELECT COUNT(*) FROM click WHERE campaign_id = %s", (campaign_id,)).fetchone()[0]
        == total
    )
    db.close()
