"""Compaction of the columnar history's closed days (models/reporting/compaction.py, docs/analytics.md):
each campaign's clicks of a closed day become one contiguous run of row groups; a kill at any instant
loses and duplicates nothing; reports during a compaction stay exact; status shows where it stands.
Real DuckDB files, real processes killed with SIGKILL, the row store on both backends."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import threading
from functools import partial

import pytest
from conftest import LANNER, ROOT, wait_until

from models.reporting.compaction import compact_history
from models.reporting.history import HistoryFiles, append_history, history_status
from models.store.duckdb.compaction import DAY_MS, Compaction, Cursor
from models.store.duckdb.connection import open_history
from models.store.duckdb.history import HISTORY_COLUMNS
from workers.bench.generate import generate_clicks
from workers.bench.historyreports import fill_history

ROW_GROUP = 122_880  # DuckDB's rows a row group.
FIRST_DAY = 20_000 * DAY_MS  # A UTC midnight (2024-10-04).
END_MS = 1_800_000_000_000


@pytest.fixture
def files(settings) -> HistoryFiles:
    return HistoryFiles(settings.history_path, settings.history_memory_limit)


def fingerprint(files: HistoryFiles) -> tuple:
    """The clicks' count, distinct ids and a hash of every column of every click: equal if and only if
    (but for a hash collision) the history holds the same clicks, whatever their order."""
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return conn.execute(
            f"SELECT COUNT(*), COUNT(DISTINCT id), SUM(CAST(hash({', '.join(HISTORY_COLUMNS)}) AS HUGEINT)) "
            "FROM click"
        ).fetchone()


def cursor_of(files: HistoryFiles) -> Cursor:
    with open_history(files.path, write=False, memory_limit=files.memory_limit, wait=60) as conn:
        return Compaction(conn).cursor()


def campaign_row_groups(files: HistoryFiles, since: int, until: int) -> dict[int, tuple[list[int], int]]:
    """Per campaign: the row groups of clicks in [since, until) only whose zone map admits it
    (pragma_storage_info), and its clicks there."""
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        compaction = Compaction(conn)
        inside = {
            group
            for group, low, high in compaction.row_group_spans("created_at")
            if since <= low <= high < until
        }
        spans = [span for span in compaction.row_group_spans("campaign_id") if span[0] in inside]
        counts = dict(
            conn.execute(
                "SELECT campaign_id, COUNT(*) FROM click WHERE created_at >= ? AND created_at < ? GROUP BY 1",
                (since, until),
            ).fetchall()
        )
    return {
        campaign: ([group for group, low, high in spans if low <= campaign <= high], count)
        for campaign, count in counts.items()
    }


def moved_on(files: HistoryFiles, seen: Cursor, process: subprocess.Popen) -> bool:
    return cursor_of(files) != seen or process.poll() is not None


@pytest.mark.long
def test_a_compaction_killed_at_any_instant_loses_nothing_and_leaves_each_campaign_contiguous(env, files):
    """240,000 clicks of 20 campaigns over a day and a fifth, laid out as the appender lays them (chunks
    of 50,000 sorted by campaign): every row group spans every campaign. `lanner analytics compact` is
    SIGKILLed twice once it has moved a slice, then finishes: the history holds the same clicks, once
    each, and each campaign of the closed day lies in a run of consecutive row groups no longer than
    its clicks need (plus the run's two ends)."""
    targets = [(campaign, campaign, campaign) for campaign in range(1, 21)]
    fill_history(files, targets, 240_000, FIRST_DAY, FIRST_DAY + DAY_MS * 6 // 5)
    before = fingerprint(files)
    assert before[:2] == (240_000, 240_000)
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        spans = Compaction(conn).row_group_spans("campaign_id")
    assert len(spans) == 2 and all((low, high) == (1, 20) for _, low, high in spans)  # Nothing skipped.

    seen = cursor_of(files)
    assert seen == Cursor(0, 0, 0)
    for _ in range(2):
        compacting = subprocess.Popen(
            [*LANNER, "analytics", "compact", "--slice", "60000"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(partial(moved_on, files, seen, compacting), 120, "a slice moved")
        finally:
            compacting.send_signal(signal.SIGKILL)  # Wherever it is: between slices, or inside one.
            _, stderr = compacting.communicate(timeout=60)
        assert compacting.returncode == -signal.SIGKILL, stderr
        assert fingerprint(files) == before
        seen = cursor_of(files)

    result = compact_history(files)
    assert (result.days_left, result.compacted_before) == (0, FIRST_DAY + DAY_MS)
    assert fingerprint(files) == before
    assert compact_history(files).moved == 0  # Nothing more is closed: the last fifth of a day is open.
    runs = campaign_row_groups(files, FIRST_DAY, FIRST_DAY + DAY_MS)
    for campaign, (groups, count) in runs.items():
        # A run of consecutive row groups (and perhaps one shared with the open day's clicks, not here).
        assert groups == list(range(groups[0], groups[0] + len(groups))) if groups else True, campaign
        assert len(groups) <= math.ceil(count / ROW_GROUP) + 1, (campaign, groups, count)
    # Most campaigns now lie in one of the day's row groups: a report of one skips the others.
    assert sum(len(groups) == 1 for groups, _ in runs.values()) >= 15


CLOSED_BEFORE = 1_800_000_000_000 // DAY_MS * DAY_MS  # 2027-01-15 00:00 UTC.


def clicks_before(files: HistoryFiles, moment: int) -> int:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        return conn.execute("SELECT COUNT(*) FROM click WHERE created_at < ?", (moment,)).fetchone()[0]


@pytest.fixture
def compacting_store(db, files):
    """Three campaigns' clicks over three days in the row store, copied into the history (two days
    closed), some past the history's position."""
    generate_clicks(db, 900, 3, campaigns=3, seed=31, end_ms=END_MS)
    append_history(db, files)
    generate_clicks(db, 100, 0.02, campaigns=3, seed=32, end_ms=END_MS + 60_000)
    return db


def test_reports_during_a_compaction_stay_exact_and_status_shows_its_progress(compacting_store, files):
    from models.reporting.reports import ReportQuery, run_report

    db = compacting_store
    shapes = [("day", "campaign"), ("country", "sub_id_1")]

    def report(source: str, group_by: tuple[str, ...]) -> list:
        made = run_report(db, ReportQuery(group_by=group_by, preset="all_time", source=source), history=files)
        return [made.total, *made.rows]

    raw = {shape: report("raw", shape) for shape in shapes}
    status = history_status(db, files)
    # The clicks span 2027-01-12 08:00 to 01-15 08:01 UTC: the days to the 15th are closed.
    assert (status["compacted_before"], status["compaction_days_left"]) == (None, 3)

    seen: list[bool] = []
    is_compacting = threading.Event()

    def read_meanwhile() -> None:
        is_compacting.wait(60)
        while is_compacting.is_set():
            seen.append(all(report("history", shape) == raw[shape] for shape in shapes))

    reader = threading.Thread(target=read_meanwhile)
    reader.start()

    def between_opens(days: int, total: int) -> None:
        # The writer has closed the file: a report gets in before the next slices move.
        is_compacting.set()
        reads = len(seen)
        wait_until(lambda: len(seen) > reads, 60, "a report between two slices")

    try:
        result = compact_history(files, limit=180, session=0, on_step=between_opens)
    finally:
        is_compacting.clear()
        reader.join(120)
    assert (result.days, result.moved) == (3, clicks_before(files, CLOSED_BEFORE))
    assert len(seen) >= 5 and all(seen)
    assert {shape: report("history", shape) for shape in shapes} == raw
    status = history_status(db, files)
    assert status["compaction_days_left"] == 0
    assert status["compacted_before"] == "2027-01-15"


# SQLite only: what the task adds (the compaction) reads and writes DuckDB alone; its append is tested
# on both backends in tests/test_history.py, and reports during a compaction above.
@pytest.mark.sqlite_only
def test_the_worker_compacts_and_cubes_after_its_append_and_the_cli_says_where_it_stands(
    compacting_store, settings, files, lanner
):
    from workers.runtime.tasks import create_huey

    assert history_status(compacting_store, files)["compaction_days_left"] == 3
    before = fingerprint(files)
    create_huey(settings, immediate=True).append_history()
    status = json.loads(lanner("analytics", "status", "--json").stdout)
    assert (status["compaction_days_left"], status["compacted_before"]) == (0, "2027-01-15")
    # Then it built the sub id cube of the same closed days (models/reporting/subidcube.py).
    assert (status["cube_days"], status["cube_days_left"], status["cube_stale_days"]) == (3, 0, 0)
    assert status["lag_clicks"] == 0
    assert fingerprint(files)[:2] == (before[0] + 100, before[1] + 100)  # The tail copied, none twice.
    assert lanner("analytics", "compact").stdout == (
        "Compacted 0 days (0 clicks rewritten); every day before 2027-01-15 is compacted.\n"
    )
