# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
"""A bounded row store (models/reporting/rawretention.py, docs/analytics.md): raw clicks older than
LANNER_RAW_RETENTION leave the row store only once the DuckDB history holds them, and old clicks keep
working from the history — a postback attributes to the right campaign, `lanner click show` and the
click log find them. Both backends, a real DuckDB file."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, wait_until
from test_panel import get, log_in, make_panel, panel, users  # noqa: F401

from models.conversions.postbacks import (
    CREATED,
    PARKED,
    UPDATED,
    ConversionRecorder,
    Received,
    parse_postback,
)
from models.migrations.deferred import run_deferred
from models.ops.retention import count_unheld
from models.reporting.clicklog import ClickFilter, list_clicks, stored_click
from models.reporting.history import HistoryFiles, append_history, rebuild_history, verify_history
from models.reporting.historyclicks import ClickHistory
from models.reporting.rawretention import (
    BEHIND,
    INCOMPLETE,
    MISSING,
    OFF,
    OK,
    plan_retention,
    prune_held_clicks,
)
from models.reporting.reports import ReportQuery, run_report
from models.store.conversions import ConversionStore
from models.store.database import open_database, write_tx
from models.store.duckdb.connection import open_history
from models.store.history import HistoryStore
from workers.bench.generate import generate_clicks

DAY_MS = 86_400_000
RETENTION = 30 * DAY_MS
RECEIVED = Received("GET", "198.51.100.9", "test")


@pytest.fixture
def files(settings) -> HistoryFiles:
    return HistoryFiles(settings.history_path, settings.history_memory_limit)


def row_ids(db) -> set[int]:
    return {row[0] for row in db.connection().execute("SELECT id FROM click").fetchall()}


def history_ids(files: HistoryFiles) -> set[int]:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM click WHERE subid IS NOT NULL").fetchall()}


def old_clicks(db, cutoff: int) -> set[int]:
    return {row[0] for row in db.connection().execute("SELECT id FROM click WHERE created_at < ?", (cutoff,))}


def prune(db, files, now: int, **options) -> object:
    return prune_held_clicks(db, files, RETENTION, global_uniqueness_hours=24, now_ms=now, pause=0, **options)


@pytest.fixture
def now() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def held_copy(tmp_path_factory) -> Path:
    """Where `held` keeps the SQLite database and history it made for the module's first test."""
    return tmp_path_factory.mktemp("held")


@pytest.fixture
def held(db, files, now, settings, held_copy):
    """1,500 clicks over 60 days, all copied into the history, the rollup backfill done.

    On SQLite made once a module (~0.25 CPU-s a test) and copied into each later test's data
    directory (both files, a pair the history's position ties together); its clicks end at the first
    test's `now`, seconds before the test's own, and every test reads what is old from its own `now`.
    On PostgreSQL made for each test: the test's database is the process's reusable one."""
    kept = held_copy / "lanner.db"
    if not settings.uses_postgres and kept.exists():
        db.close()
        for stale in ("-wal", "-shm"):
            settings.database_path.with_name(settings.database_path.name + stale).unlink(missing_ok=True)
        shutil.copyfile(kept, settings.database_path)
        shutil.copytree(held_copy / "history", files.path.parent, dirs_exist_ok=True)
        open_database(settings.database_path, autocheckpoint=True)
        return row_ids(db)
    generate_clicks(db, 1_500, 60, campaigns=3, seed=5, end_ms=now)
    run_deferred(db)
    append_history(db, files)
    if not settings.uses_postgres:
        db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)").close()  # The whole database in its file.
        shutil.copytree(files.path.parent, held_copy / "history")
        shutil.copyfile(settings.database_path, kept)  # Last: its presence says the pair is whole.
    return row_ids(db)


def test_retention_deletes_only_old_clicks_the_history_holds_and_keeps_queued_ones(db, files, now, held):
    cutoff = now - RETENTION
    old = old_clicks(db, cutoff)
    assert 0 < len(old) < len(held)
    queued = min(old)
    with write_tx(db):  # A postback's sub_id on an old click: its history copy is stale until copied again.
        ConversionStore(db.connection()).set_sub_id(queued, 3, "late")
    run = prune(db, files, now, batch=100)
    assert run.plan.state == OK and run.deleted == len(old) - 1
    assert row_ids(db) == held - old | {queued}
    assert history_ids(files) == held  # Everything deleted is in the history, with its subid.
    append_history(db, files)  # Copied again: now the history answers for it, and it goes.
    assert prune(db, files, now).deleted == 1 and row_ids(db) == held - old
    assert verify_history(db, files).is_consistent  # The pruned hours are counted apart.


def test_nothing_is_deleted_while_the_history_is_behind_missing_or_short(db, files, now, held):
    cutoff = now - RETENTION
    # Old clicks landed after the last append (a late node, `lanner generate`): not held yet.
    assert count_unheld(db, RETENTION, now_ms=now) == 0  # What `lanner prune` would lose for good.
    generate_clicks(db, 50, 1, campaigns=3, seed=6, end_ms=now - 40 * DAY_MS)
    assert count_unheld(db, RETENTION, now_ms=now) == 50
    plan = plan_retention(db, RETENTION, global_uniqueness_hours=24, now_ms=now)
    assert plan.state == BEHIND and "behind" in plan.reason
    before = row_ids(db)
    assert prune(db, files, now).deleted == 0 and row_ids(db) == before
    # A file replaced by an older copy: its position is behind the row store's trusted one.
    stale = files.path.with_name("stale.duckdb")
    shutil.copyfile(files.path, stale)
    append_history(db, files)
    shutil.copyfile(stale, files.path)
    run = prune(db, files, now)
    assert (run.plan.state, run.deleted) == (INCOMPLETE, 0) and row_ids(db) == before
    files.path.unlink()
    run = prune(db, files, now)
    assert (run.plan.state, run.deleted) == (MISSING, 0) and row_ids(db) == before
    # Made again by the next append, then the deletion goes on.
    append_history(db, files)
    old = old_clicks(db, cutoff)
    assert prune(db, files, now).deleted == len(old) - 1
    # But the newest click, old as it is: SQLite would give its id to the next click.
    assert old_clicks(db, cutoff) == {max(row_ids(db))}
    off = prune_held_clicks(db, files, 0, global_uniqueness_hours=24)
    assert off.plan.state == OFF and "off" in off.plan.reason


def test_a_rebuild_keeps_the_clicks_only_the_history_holds(db, files, now, held):
    old = old_clicks(db, now - RETENTION)
    prune(db, files, now)
    result = rebuild_history(db, files, chunk=400)
    assert result.carried == len(old) and not result.carry_error
    assert history_ids(files) == held and verify_history(db, files).is_consistent
    assert rebuild_history(db, files).carried == len(old)  # Again: the same, nothing twice.
    assert history_ids(files) == held
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        assert conn.execute("SELECT COUNT(*) FROM click").fetchone()[0] == len(held)


def test_a_lost_history_names_the_pruned_clicks_it_cannot_bring_back_and_their_period(
    db, files, now, held, caplog, lanner
):
    old = old_clicks(db, now - RETENTION)
    prune(db, files, now)
    pruned = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime((now - RETENTION) / 1000))
    said = f"up to {len(old):,} clicks created before {pruned} were pruned from the row store"
    files.path.unlink()  # Deleted: made again from the row store by the next append, without them.
    with caplog.at_level(logging.WARNING):
        result = append_history(db, files)
    assert (result.restarted_from, result.lost) == (0, len(old))
    assert said in caplog.text and "cannot be rebuilt" in caplog.text
    assert history_ids(files) == held - old
    assert verify_history(db, files).is_consistent  # Nothing else is missing.
    files.path.write_bytes(b"\0" * 100_000)  # Damaged: a rebuild cannot read it; it says the same.
    rebuilt = lanner("analytics", "rebuild").stdout
    assert (
        f"Up to {len(old):,} clicks created before {pruned} were pruned from the row store and the old file "
        "could not be read ("
        in rebuilt
        and "they could not be rebuilt." in rebuilt
    )
    assert history_ids(files) == held - old


# Row locks are PostgreSQL's (SQLite's BEGIN IMMEDIATE takes the whole database)
@pytest.mark.postgresql_only
def test_postgresql_skips_a_click_a_postback_holds_and_never_waits_for_it(
    db, files, now, held, settings, backend
):
    """A mutation in flight (a postback's row lock) keeps its click for the next run; the run goes on."""
    import psycopg

    old = old_clicks(db, now - RETENTION)
    held_one = min(old)
    with psycopg.connect(settings.database_location) as holder:
        holder.execute("SELECT 1 FROM click WHERE id = %s FOR NO KEY UPDATE", (held_one,))
        assert prune(db, files, now).deleted == len(old) - 1  # Returned: it did not wait for the holder.
        holder.rollback()
    assert row_ids(db) == held - old | {held_one}
    assert prune(db, files, now).deleted == 1 and row_ids(db) == held - old


def test_a_retention_shorter_than_a_uniqueness_window_is_raised_to_it(db, now):
    run_deferred(db)
    plan = plan_retention(db, DAY_MS, global_uniqueness_hours=72, now_ms=now)
    assert plan.retention_ms == 4 * DAY_MS and plan.cutoff == now - 4 * DAY_MS and "raised" in plan.reason


def test_a_kill_mid_prune_loses_no_click(db, files, env, now, held):
    """A real SIGKILL of a process between two of its batches: every click is in one store or the other,
    and the next run finishes the deletion."""
    old = old_clicks(db, now - RETENTION)
    script = (
        "import sys, time\n"
        "from settings import load_settings\n"
        "from models.store.database import open_database, db\n"
        "from models.reporting.history import HistoryFiles\n"
        "from models.reporting.rawretention import prune_held_clicks\n"
        "s = load_settings()\n"
        "open_database(s.database_location)\n"
        "prune_held_clicks(db, HistoryFiles(s.history_path, s.history_memory_limit), 30 * 86400000,\n"
        "    global_uniqueness_hours=24, batch=20, pause=30, run_seconds=600,\n"
        "    on_batch=lambda n: (print(n, flush=True)))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        first = process.stdout.readline()  # After its first batch committed, before the second.
        assert first.strip() == "20"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    left = row_ids(db)
    assert len(held - left) == 20 and (held - left) <= old
    assert left | history_ids(files) == held
    assert prune(db, files, now).deleted == len(old) - 20 and row_ids(db) == held - old


def report_by_campaign(db) -> dict[int, dict]:
    report = run_report(db, ReportQuery(group_by=("campaign",), preset="all_time"))
    return {row["campaign"]: row for row in report.rows}


def test_a_postback_for_a_pruned_click_attributes_to_its_campaign(db, files, now, held):
    cutoff = now - RETENTION
    click_id, subid, campaign_id, created_at = (
        db.connection()
        .execute(
            "SELECT id, subid, campaign_id, created_at FROM click WHERE created_at < ? ORDER BY id LIMIT 1",
            (cutoff,),
        )
        .fetchone()
    )
    prune(db, files, now)
    assert click_id not in row_ids(db)
    before = report_by_campaign(db)
    # Without the history the click is unknown: parked, as one still in the spool.
    blind = ConversionRecorder(db, park_ms=60_000)
    assert (
        blind.record(parse_postback({"subid": subid, "tid": "x", "status": "lead"}), RECEIVED).verdict
        == PARKED
    )
    recorder = ConversionRecorder(db, park_ms=60_000, history=ClickHistory(files))
    params = {"subid": subid, "tid": "t1", "status": "lead", "payout": "12.5", "currency": "USD"}
    outcome = recorder.record(parse_postback(params), RECEIVED)
    assert outcome.verdict == CREATED
    stored = (
        db.connection()
        .execute(
            "SELECT click_id, campaign_id, click_created_at FROM conversion WHERE id = ?",
            (outcome.conversion_id,),
        )
        .fetchone()
    )
    assert stored == (click_id, campaign_id, created_at)
    # The correction (lead -> sale) of an old click: its revenue lands in its own campaign.
    outcome = recorder.record(parse_postback({**params, "status": "sale"}), RECEIVED)
    assert outcome.verdict == UPDATED
    after = report_by_campaign(db)
    assert after[campaign_id]["revenue"] == pytest.approx(before[campaign_id]["revenue"] + 12.5)
    assert after[campaign_id]["sales"] == before[campaign_id]["sales"] + 1
    for other in after.keys() - {campaign_id}:
        assert after[other]["revenue"] == before[other]["revenue"]
    # The click is back in the row store (a converted click stays) and the history still answers for it.
    assert click_id in row_ids(db) and prune(db, files, now).deleted == 0
    assert click_id in history_ids(files) and HistoryStore(db.connection()).state()[0] >= click_id


def test_a_postback_parked_on_a_node_without_the_history_is_matched_by_the_history_nodes_flusher(
    db, files, now, held, tmp_path
):
    from models.clicks.record import new_subid

    click_id, subid, campaign_id = (
        db.connection()
        .execute(
            "SELECT id, subid, campaign_id FROM click WHERE created_at < ? ORDER BY id LIMIT 1",
            (now - RETENTION,),
        )
        .fetchone()
    )
    prune(db, files, now)
    elsewhere = ClickHistory(HistoryFiles(tmp_path / "other-node" / "clicks.duckdb"))
    web = ConversionRecorder(db, park_ms=3_600_000, history=elsewhere)
    made_up = new_subid(now - 40 * DAY_MS)  # Old, well formed, and no click's.
    for each in (subid, made_up):
        assert (
            web.record(parse_postback({"subid": each, "status": "sale", "payout": "3"}), RECEIVED).verdict
            == PARKED
        )
    flusher = ConversionRecorder(db, park_ms=3_600_000, history=ClickHistory(files))
    outcomes = flusher.settle_parked()
    assert [outcome.verdict for outcome in outcomes] == [CREATED]
    stored = (
        db.connection()
        .execute("SELECT click_id, campaign_id FROM conversion WHERE id = ?", (outcomes[0].conversion_id,))
        .fetchone()
    )
    assert stored == (click_id, campaign_id)
    assert flusher._missed == {made_up} and flusher.settle_parked() == []  # Not asked again.


def test_click_show_and_the_click_log_find_pruned_clicks(db, files, now, held, settings, lanner):
    cutoff = now - RETENTION
    newest_old = (
        db.connection()
        .execute(
            "SELECT id, subid, campaign_id FROM click WHERE created_at < ? "
            "ORDER BY created_at DESC, id DESC LIMIT 1",
            (cutoff,),
        )
        .fetchone()
    )
    everything = list_clicks(db, ClickFilter(limit=2_000, timezone="UTC"))
    prune(db, files, now)
    history = ClickHistory(files)
    data = stored_click(db, newest_old[1], geo_path=settings.geo_path, history=history)
    assert data["click"]["id"] == newest_old[0] and data["click"]["campaign_id"] == newest_old[2]
    shown = lanner("click", "show", newest_old[1], "--json")
    assert json.loads(shown.stdout)["click"]["id"] == newest_old[0]
    # The whole log, a page at a time, is what it was before the prune (old clicks without their IP).
    pages, before_id = [], None
    while True:
        page = list_clicks(db, ClickFilter(limit=400, before_id=before_id, timezone="UTC"), history)
        pages += page
        if len(page) < 400:
            break
        before_id = page[-1]["id"]
    assert [row["id"] for row in pages] == [row["id"] for row in everything]
    # One campaign's log, ordered by time, crosses from the row store into the history.
    campaign = newest_old[2]
    expected = [row["id"] for row in list_clicks(db, ClickFilter(campaign_id=campaign, limit=2_000), history)]
    got, before_id = [], None
    while True:
        page = list_clicks(db, ClickFilter(campaign_id=campaign, limit=50, before_id=before_id), history)
        got += [row["id"] for row in page]
        if len(page) < 50:
            break
        before_id = page[-1]["id"]
    assert got == expected and newest_old[0] in got
    assert len(expected) == sum(1 for row in everything if row["campaign_id"] == campaign)


def test_status_shows_the_retention_the_oldest_raw_click_and_history_only_clicks(
    db, files, now, held, lanner
):
    old = old_clicks(db, now - RETENTION)
    prune(db, files, now)
    status = json.loads(lanner("analytics", "status", "--json").stdout)
    assert status["retention"] == "30 days" and status["retention_state"] == OK
    assert status["history_only_clicks"] == len(old)
    oldest = db.connection().execute("SELECT MIN(created_at) FROM click").fetchone()[0]
    assert status["oldest_raw_click_at"] == time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(oldest / 1000))


def test_the_panel_shows_a_pruned_click_and_lists_it(db, files, now, held, panel, users):
    subid, campaign_id = (
        db.connection()
        .execute(
            "SELECT subid, campaign_id FROM click WHERE created_at < ? ORDER BY created_at DESC LIMIT 1",
            (now - RETENTION,),
        )
        .fetchone()
    )
    prune(db, files, now)
    admin = log_in(panel)
    status, _, html = get(panel, f"/panel/clicks/{subid}", admin)
    assert status == 200 and subid in html
    assert subid in get(panel, f"/panel/clicks?campaign={campaign_id}&limit=500", admin)[2]


@pytest.mark.long
def test_a_real_worker_deletes_old_clicks_once_its_history_holds_them(db, files, env, now, start_consumer):
    """The default LANNER_RAW_RETENTION (30 days): the worker's first append, then the deletion."""
    generate_clicks(db, 600, 60, campaigns=2, seed=8, end_ms=now)
    run_deferred(db)
    everything = row_ids(db)
    old = old_clicks(db, now - RETENTION)
    worker = start_consumer()
    wait_until(
        lambda: not old_clicks(db, now - RETENTION) - {max(everything)},
        120,
        "the deletion",
        lambda: worker.log,
    )
    assert row_ids(db) == everything - old | ({max(everything)} & old)
    assert history_ids(files) == everything


def test_the_sorted_click_log_merges_the_history_s_clicks_into_its_order(db, files, now, held, panel, users):
    from test_panel_log_sort import csv_column, ordered, table
    from test_panel_logs import walk

    rows = table(db, "SELECT id, subid, created_at, campaign_id, country FROM click")
    names = {row["id"]: row["name"].lower() for row in table(db, "SELECT id, name FROM campaign")}
    for row in rows:
        row["campaign"] = (names[row["campaign_id"]], row["campaign_id"])
    prune(db, files, now)
    assert len(row_ids(db)) < len(rows) - 500  # Most clicks are in the history only.
    admin = log_in(panel)
    by_country = [row["subid"] for row in ordered(rows, [("country", False), ("created_at", True)])]
    pages = walk(panel, admin, "/panel/clicks?sort=country,-time&limit=500")
    assert [s for page in pages for s in page] == by_country and len(pages) == 3
    # The CSV, by keyset from both stores: a campaign by its name (Z to A), the oldest first within one.
    by_campaign = [row["subid"] for row in ordered(rows, [("campaign", True), ("created_at", False)])]
    assert csv_column(panel, "/panel/clicks.csv?sort=-campaign,time", admin, "Subid") == by_campaign
