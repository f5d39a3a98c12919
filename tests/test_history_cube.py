"""The columnar history's sub id cube (models/store/duckdb/subidcube.py, docs/analytics.md): reports it
answers equal the raw rows' in any timezone (a half-hour offset, a DST day), with clicks queued for a
fresh copy, copied again after their day was built, past the position; a kill while it is built leaves
no day half-counted; compaction leaves it right; a report it cannot answer reads the clicks; status,
verify and its repair see it. The row store on both backends; real DuckDB files and processes."""

from __future__ import annotations

import signal
import subprocess
from datetime import UTC, datetime
from functools import partial

import pytest
from conftest import LANNER, ROOT, wait_until

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.reporting.compaction import compact_history
from models.reporting.costs import spread_cost
from models.reporting.history import HistoryFiles, append_history, history_status, verify_history
from models.reporting.reports import ReportQuery, run_report
from models.reporting.reportstream import stream_report
from models.reporting.subidcube import build_cube
from models.store.database import read_tx, write_tx
from models.store.duckdb.connection import open_history
from models.store.duckdb.reports import PieceSql, converted_click_ids
from models.store.duckdb.subidcube import DAY_MS, SubidCube
from models.store.history import HistoryStore
from workers.bench.generate import generate_clicks

# Five days to 2026-11-03 12:00 UTC: New York's clocks go back on 2026-11-01 (a 25-hour local day).
END_MS = int(datetime(2026, 11, 3, 12, tzinfo=UTC).timestamp() * 1000)
RECEIVED = Received("GET", "127.0.0.1", "test")
SHAPES = [
    dict(group_by=("sub_id_1",)),
    dict(
        group_by=("sub_id_1",),
        filters={"campaign": ("1",)},
        since="2026-10-30T07:30",
        until="2026-11-02T18:45",
    ),
    dict(group_by=("country", "sub_id_2")),
    dict(group_by=("day", "sub_id_1")),  # UTC days: the cube's own.
    dict(group_by=("traffic_source", "sub_id_1"), filters={"sub_id_1": ("1001", "1003", "1005")}),
    dict(group_by=("campaign",), filters={"country": ("US", "DE")}, source="history"),
]
ZONES = ("UTC", "Asia/Kolkata", "America/New_York")


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


def rows_of_dicts(rows: list[dict]) -> list[dict]:
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()} for row in rows]


def same(db, files, shape: dict, timezone: str = "UTC") -> None:
    """The shape's report read from the history (the cube where it answers) equals the raw rows'."""
    shape = {**shape, "timezone": timezone}
    history = run_report(db, ReportQuery(**{"source": "history", **shape}), history=files)
    raw = run_report(db, ReportQuery(**{**shape, "source": "raw"}))
    assert history.fallback is None
    assert rows_of(history) == rows_of(raw), shape
    assert history.total == pytest.approx(raw.total), shape


def cube(files: HistoryFiles):
    return open_history(files.path, write=False, memory_limit=files.memory_limit, wait=60)


def built_days(files: HistoryFiles) -> list[int]:
    with cube(files) as conn:
        return [day for day, _, _ in SubidCube(conn).days(0, 2**62)]


def check(files: HistoryFiles) -> list[tuple]:
    """The days whose cube differs from the click table's sums (none, if it is right)."""
    with cube(files) as conn:
        rows = SubidCube(conn).check()
    return [row for row in rows if not (row[1] == row[2] == row[4] and abs(row[3] - row[5]) < 1e-9)]


@pytest.fixture
def cubed(db, settings) -> HistoryFiles:
    """400 clicks over five days in two campaigns, 30 zones, some converted; copied and the four closed
    days built into the cube."""
    generate_clicks(db, 400, 5, campaigns=2, seed=11, end_ms=END_MS, zone_count=30)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    for subid in [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()][::9]:
        recorder.record(parse_postback({"subid": subid, "status": "sale", "payout": "4.5"}), RECEIVED)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    result = build_cube(files)
    assert (result.days, result.days_left) == (5, 0)  # 2026-10-29 (from 12:00) to 11-02: closed.
    return files


def test_cube_answered_reports_equal_raw_across_timezones_and_others_read_the_clicks(db, cubed):
    """Each shape in UTC, and two in India's +5:30 and New York over its DST day; the cube answers the
    whole UTC days (checked: spoiling it changes the report), the clicks the edges. A filter on the
    device, a group by stream, two sub id slots, local hours: the cube cannot, the clicks answer."""
    for shape in SHAPES:
        same(db, cubed, shape)
    for timezone in ZONES[1:]:
        for shape in SHAPES[1:3]:
            same(db, cubed, shape, timezone)
    for groups, filters, bucket in (
        (("sub_id_1",), {"device": ("mobile",)}, None),
        (("stream", "sub_id_1"), {}, None),
        (("sub_id_1",), {"sub_id_2": ("a",)}, None),
        (("sub_id_1",), {}, 3_600_000),
    ):
        assert PieceSql(groups, filters, bucket).cube_slot() is None
    assert PieceSql(("sub_id_1",), {"campaign": (1,)}, None).cube_slot() == 1
    same(db, cubed, dict(group_by=("sub_id_1",), filters={"device": ("mobile", "desktop")}))
    same(db, cubed, dict(group_by=("day", "sub_id_1"), filters={"sub_id_2": ("1", "2")}), "Asia/Kolkata")
    # The conversion piece with its clicks' ids named (up to CLICK_ID_LIST) and joined as before.
    piece = PieceSql(("country", "sub_id_1"), {"campaign": (1, 2)}, None)
    with read_tx(db):
        store = HistoryStore(db.connection())
        answered = ((store.state()[0], []), (store.conversion_state()[0], []))
    with cube(cubed) as conn:
        ids = converted_click_ids(conn, piece, 0, END_MS, *answered)
        named = conn.execute(*piece.history_conversions(0, END_MS, *answered, ids)).fetchall()
        joined = conn.execute(*piece.history_conversions(0, END_MS, *answered)).fetchall()
    assert ids and len(ids) == 45 and sorted(named) == sorted(joined) and named
    # The streamed CSV's DuckDB sums read the same piece (reportstream's stream_groups).
    query = ReportQuery(group_by=("country", "sub_id_1"), preset="all_time")
    stream = stream_report(db, query, history=cubed, chunk=50)
    assert stream.streamed and rows_of_dicts(list(stream.rows)) == rows_of(
        run_report(db, query, history=cubed)
    )
    with open_history(cubed.path, write=True, memory_limit=cubed.memory_limit) as conn:
        spoiled = conn.execute("UPDATE subid_cube SET clicks = clicks + 1000 WHERE slot = 1").fetchone()[0]
    report = run_report(db, ReportQuery(group_by=("sub_id_1",), source="history"), history=cubed)
    assert spoiled > 0 and report.total["clicks"] == 400 + 1000 * spoiled
    assert check(cubed) == []  # Slot 0 (the totals) is what verify compares: not spoiled.
    same(db, cubed, dict(group_by=("sub_id_1",), filters={"device": ("mobile", "desktop")}))  # Not read.


def test_queued_recopied_late_and_compacted_clicks_of_built_days_count_once(db, cubed):
    """A cost spread queues campaign 1's clicks for a fresh copy (the cube still holds their old
    copies: taken off); their copy again marks their days stale in the same transaction (read from
    the clicks) until built again, unless it is copied as it was; a click landing late into a built
    day marks it too; compaction moves the clicks and leaves the cube right; verify finds a wrong day
    and its repair builds it again."""
    spread_cost(db, 1, END_MS - 5 * DAY_MS, END_MS, 77.0)
    for shape in SHAPES[:3]:
        same(db, cubed, shape, "Asia/Kolkata")
    days = built_days(cubed)
    assert append_history(db, cubed).recopied > 0
    assert built_days(cubed) == []  # Every day had a click of campaign 1.
    same(db, cubed, SHAPES[0])
    assert build_cube(cubed).days == len(days)
    assert built_days(cubed) == days and check(cubed) == []
    # Queued and copied again as it was (a click put back for a late postback): its day stays built.
    with write_tx(db):
        HistoryStore(db.connection()).record_changes(
            [db.execute_sql("SELECT MIN(id) FROM click").fetchone()[0]]
        )
    assert append_history(db, cubed).recopied == 1
    assert built_days(cubed) == days
    generate_clicks(db, 3, 0.01, campaigns=2, seed=12, end_ms=END_MS - 3 * DAY_MS)  # Late, into a built day.
    append_history(db, cubed)
    assert len(built_days(cubed)) == len(days) - 1
    same(db, cubed, SHAPES[1])
    build_cube(cubed)
    assert check(cubed) == [] and built_days(cubed) == days
    compact_history(cubed, limit=60)
    assert check(cubed) == [] and built_days(cubed) == days
    same(db, cubed, SHAPES[1], "America/New_York")

    wrong = days[-2]
    with open_history(cubed.path, write=True, memory_limit=cubed.memory_limit) as conn:
        conn.execute("UPDATE subid_cube SET clicks = clicks + 1 WHERE slot = 0 AND day = ?", (wrong,))
    result = verify_history(db, cubed)
    assert [m.day for m in result.cube_mismatches] == [wrong] and not result.is_consistent
    repaired = verify_history(db, cubed, repair=True)
    assert repaired.cube_repaired == 1 and repaired.is_consistent
    assert check(cubed) == [] and verify_history(db, cubed).cube_mismatches == []
    same(db, cubed, SHAPES[0])


def days_built(files: HistoryFiles, process: subprocess.Popen) -> bool:
    return bool(built_days(files)) or process.poll() is not None


@pytest.mark.sqlite_only  # DuckDB's alone: the row store plays no part in building the cube.
def test_a_kill_while_the_cube_is_built_leaves_no_day_half_counted(db, settings, env):
    generate_clicks(db, 900, 30, campaigns=2, seed=5, end_ms=END_MS, zone_count=50)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    building = subprocess.Popen(
        [*LANNER, "analytics", "cube"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(partial(days_built, files, building), 120, "a day built")
    finally:
        building.send_signal(signal.SIGKILL)  # Between two days, or inside one's transaction.
        _, stderr = building.communicate(timeout=60)
    assert check(files) == [], stderr
    status = history_status(db, files)
    assert status["cube_days"] == len(built_days(files)) > 0
    assert status["cube_days"] + status["cube_days_left"] == 30
    assert build_cube(files).days == status["cube_days_left"]
    assert check(files) == [] and len(built_days(files)) == 30
    same(db, files, SHAPES[0], "Asia/Kolkata")
