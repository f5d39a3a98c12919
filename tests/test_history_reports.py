"""Reports read the columnar history through every surface (`lanner report`, /api/report; the panel's
is tests/test_panel_reports.py's), and a conversion whose click only the history holds keeps its
click's dimensions. On both backends."""

from __future__ import annotations

import json
import random

import falcon.testing
import pytest

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ReportQuery, run_report
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
SHAPES = [
    dict(group_by=("sub_id_1",)),
    dict(group_by=("day", "sub_id_2"), timezone="America/New_York"),
    dict(group_by=("country", "os")),
    dict(group_by=("offer",), filters={"sub_id_1": ("1", "2", "3", "4")}),
    dict(group_by=("referrer_domain",), filters={"campaign": ("1",), "country": ("US", "DE", "GB")}),
    dict(group_by=("campaign",)),  # The rollups'; its unconverted conversions name their clicks' copies.
    dict(group_by=("offer",), filters={"country": ("US", "DE")}),
]


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


@pytest.fixture
def converted(db, settings) -> HistoryFiles:
    """600 clicks over three days in two campaigns, 120 of them converted (some twice, some in a
    currency without a rate), all copied into the history."""
    generate_clicks(db, 600, 3, campaigns=2, seed=7)
    run_deferred(db)
    rng = random.Random(3)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, 120):
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale"]),
            "payout": f"{rng.uniform(1, 30):.2f}",
            "currency": rng.choice(["", "", "JPY"]),  # JPY has no exchange rate: not in revenue.
        }
        recorder.record(parse_postback(params), RECEIVED)
        if rng.random() < 0.3:
            recorder.record(parse_postback({**params, "status": "sale", "payout": "9.5"}), RECEIVED)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    return files


def test_conversions_of_clicks_only_the_history_holds_keep_their_click_dimensions(db, converted):
    """As LANNER_RAW_RETENTION leaves them: campaign 1's clicks gone from the row store once copied,
    their conversions kept. A report by what only the click knows (sub ids, country, referrer) counts
    them on the history's copy of their click."""
    import time

    from models.reporting.reports import PrunedRangeError
    from models.store.database import write_tx
    from models.store.meta import MetaStore
    from models.store.retention import RetentionStore

    before = [run_report(db, ReportQuery(preset="all_time", source="raw", **shape)) for shape in SHAPES]
    assert before[0].total["conversions"] >= 120 and before[0].unconverted
    cutoff = int(time.time() * 1000) + 1
    with write_tx(db):  # The cutoff recorded as `lanner prune` records its own (docs/analytics.md).
        deleted = RetentionStore(db.connection()).delete_clicks_before(1, cutoff, 10**6)
        MetaStore(db.connection()).move_pruned_before(cutoff)
    assert deleted > 100
    with pytest.raises(PrunedRangeError):  # The row store alone can no longer answer.
        run_report(db, ReportQuery(preset="all_time", source="raw", **SHAPES[0]))
    for shape, expected in zip(SHAPES, before, strict=True):
        for source in ("history", "auto"):
            report = run_report(db, ReportQuery(preset="all_time", source=source, **shape), history=converted)
            names = {*shape["group_by"], *shape.get("filters", {})}
            rollups = source == "auto" and names <= {"campaign", "offer", "country"}  # The small cubes'.
            assert ("history" not in report.sources) is rollups, (shape, source)
            assert rows_of(report) == rows_of(expected), (shape, source)
            assert report.total == pytest.approx(expected.total)
            assert report.unconverted == expected.unconverted, (shape, source)


def test_lanner_report_reads_the_history_and_raw_reads_the_row_store(db, converted, lanner):
    def report(*args: str) -> dict:
        return json.loads(lanner("report", "-g", "sub_id_1", "--preset", "all_time", "--json", *args).stdout)

    answered, raw = report(), report("--raw")
    assert answered["sources"] == ["history"] and raw["sources"] == ["raw"]
    assert answered["rows"] == raw["rows"] and answered["total"] == raw["total"]
    assert not any("did not answer" in note for note in answered["notes"])
    converted.path.write_bytes(b"not a DuckDB file" * 1000)
    fell_back = lanner("report", "-g", "sub_id_1", "--preset", "all_time")
    assert "Note: The columnar history did not answer" in fell_back.stdout
    assert "cannot be read" in fell_back.stdout


def test_the_report_apis_read_the_history_and_refuse_bad_queries_with_400(db, settings, converted):
    from app import create_admin_app
    from models.conversions.postbacks import read_secret

    client = falcon.testing.TestClient(create_admin_app(settings, db=db))
    key = {"X-Api-Key": read_secret(db, "api_key")}

    def get(path: str = "/api/report", **params: str) -> falcon.testing.Result:
        return client.simulate_get(path, params={"preset": "all_time", **params}, headers=key)

    expected = run_report(db, ReportQuery(group_by=("sub_id_1",), preset="all_time", source="raw"))
    for path in ("/api/report", "/api/v1/reports"):
        answer = get(path, group="sub_id_1")
        assert answer.status_code == 200, answer.text
        assert answer.json["sources"] == ["history"], path
        assert answer.json["total"] == pytest.approx(expected.total)
        assert not any("did not answer" in note for note in answer.json["notes"])
    for params, words in (
        (dict(group="sub_id_99"), "Cannot group or filter by 'sub_id_99'"),
        (dict(group="planet,sub_id_1"), "Cannot group or filter by 'planet'"),
        (dict(preset="", **{"from": "0001-01-01", "to": "9999-12-31"}), "out of range"),
        (dict(preset="", **{"from": "2026-01-01T25:00"}), "is not a date"),
        (dict(group="day,hour"), "not both"),
        (dict(timezone="Mars/Base"), "Unknown timezone"),
        (dict(**{"f.lander": "x"}), "takes ids"),
    ):
        for path in ("/api/report", "/api/v1/reports"):
            refused = get(path, **params)
            assert refused.status_code == 400, (path, params, refused.text)
            assert words in refused.json["description"], (path, params, refused.json)


def test_pruned_time_is_answered_by_a_history_that_held_it_and_refused_by_one_made_again(db, converted):
    """`lanner prune` leaves the history its copies: a sub id report over pruned time is the one from
    before the prune, also after a rebuild (which carries them over). A history made again without
    the old file lacks that time: the report refuses, naming both."""
    import time

    from models.ops.retention import prune_clicks
    from models.reporting.history import rebuild_history
    from models.reporting.reports import PrunedRangeError

    day = 86_400_000
    shape = dict(group_by=("sub_id_1",), preset="all_time")
    before = run_report(db, ReportQuery(source="raw", **shape))
    now_ms = int(time.time() * 1000)
    assert prune_clicks(db, 2 * day, global_uniqueness_hours=24, now_ms=now_ms + day) > 100
    with pytest.raises(PrunedRangeError, match="were pruned"):
        run_report(db, ReportQuery(**shape))  # The row store alone.
    answered = run_report(db, ReportQuery(**shape), history=converted)
    assert answered.sources == ["history"] and answered.fallback is None
    assert rows_of(answered) == rows_of(before) and answered.unconverted == before.unconverted
    # A rebuild carries the pruned clicks over from the file it replaces: the report still answers.
    assert rebuild_history(db, converted).carried > 100
    assert rows_of(run_report(db, ReportQuery(**shape), history=converted)) == rows_of(before)
    # Made again without that file, the history lacks the pruned time and says so.
    converted.path.unlink()
    rebuild_history(db, converted)
    with pytest.raises(PrunedRangeError, match="were pruned.*made again after a prune"):
        run_report(db, ReportQuery(**shape), history=converted)
    later = run_report(db, ReportQuery(group_by=("sub_id_1",), since=_local(now_ms)), history=converted)
    assert later.sources == ["history"]  # Time after the cutoff: the rebuilt history answers.


def _local(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M")


def test_reports_read_the_history_only_on_the_node_that_keeps_it(env):
    from settings import load_settings

    cluster = {**env, "LANNER_REDIS_URL": "redis://127.0.0.1:1/0", "LANNER_NODE_ID": "b"}
    assert HistoryFiles.for_reports(load_settings(env)) == HistoryFiles.of(load_settings(env))  # One box.
    assert HistoryFiles.for_reports(load_settings({**cluster, "LANNER_HISTORY_NODE": "b"})) is not None
    assert HistoryFiles.for_reports(load_settings({**cluster, "LANNER_HISTORY_NODE": "a"})) is None
    assert HistoryFiles.for_reports(load_settings(cluster)) is None


def test_lanner_prune_keeps_a_click_queued_for_a_fresh_copy_so_it_counts_once(db, settings):
    """A click changed after its copy (here its cost) is read from the row store, its copy being stale:
    a prune that deleted it would leave it counted nowhere. The prune keeps it until the next append
    has copied it again; then the next prune takes it and the history answers for it."""
    import time

    from models.ops.retention import count_queued, prune_clicks
    from models.store.costs import CostStore
    from models.store.database import write_tx
    from models.store.history import ROW_COLUMNS, HistoryStore

    day = 86_400_000
    now_ms = int(time.time() * 1000)
    generate_clicks(db, 150, 3, campaigns=1, seed=11, end_ms=now_ms)
    run_deferred(db)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    conn = db.connection()
    rows = HistoryStore(conn).rows_after(0, 10**12, 10**6)
    at = ROW_COLUMNS.index("created_at")
    old = [row[0] for row in rows if row[at] < now_ms - day]
    changed = old[:3]
    with write_tx(db):
        CostStore(conn).set_costs([(2.5, click_id) for click_id in changed])
    assert HistoryStore(conn).pending() == 3
    shape = dict(group_by=("sub_id_1",), preset="all_time")
    before = run_report(db, ReportQuery(source="raw", **shape))
    assert before.total["cost"] == pytest.approx(7.5)

    assert count_queued(db, 2 * day, now_ms=now_ms + day) == 3
    assert prune_clicks(db, 2 * day, global_uniqueness_hours=24, now_ms=now_ms + day) == len(old) - 3
    answered = run_report(db, ReportQuery(**shape), history=files)
    assert answered.sources == ["history"]
    assert rows_of(answered) == rows_of(before) and answered.total == pytest.approx(before.total)

    append_history(db, files)  # Copies the three again; the next prune takes them.
    assert count_queued(db, 2 * day, now_ms=now_ms + day) == 0
    assert prune_clicks(db, 2 * day, global_uniqueness_hours=24, now_ms=now_ms + day) == 3
    again = run_report(db, ReportQuery(**shape), history=files)
    assert rows_of(again) == rows_of(before) and again.total == pytest.approx(before.total)


def test_a_history_report_holds_no_row_store_snapshot_while_duckdb_sums(db, converted, settings, monkeypatch):
    """Issue 28: the row store's snapshot is held while the row store is read, not while DuckDB sums
    (under the history's shared lock): reports back to back kept the flusher's WAL checkpoints from
    finishing. A checkpoint made while the report reads DuckDB finishes, and the report is as raw."""
    import models.reporting.reports as reports
    from models.store.database import connect
    from models.store.maintenance import MaintenanceStore

    generate_clicks(db, 40, 0.01, campaigns=2, seed=8)  # A tail the history has not copied: WAL frames too.
    query = dict(preset="all_time", group_by=("sub_id_1",))
    expected = run_report(db, ReportQuery(source="raw", **query))
    other = connect(settings.database_location)  # The flusher's connection.
    seen: list[tuple[bool, bool]] = []
    real = reports.history_click_rows

    def read_from_history(*args, **kwargs):
        checkpointed = MaintenanceStore(other.connection()).checkpoint(truncate=True, busy_timeout_ms=0)
        seen.append((db.in_transaction(), checkpointed))
        return real(*args, **kwargs)

    monkeypatch.setattr(reports, "history_click_rows", read_from_history)
    try:
        report = run_report(db, ReportQuery(source="history", **query), history=converted)
    finally:
        other.close()
    assert seen == [(False, True)]
    assert rows_of(report) == rows_of(expected) and report.total == expected.total
