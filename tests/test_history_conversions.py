"""Conversions in the columnar history (docs/analytics.md, issue 28 point 1): copied once whatever kills
the append, copied again when they change (status, payout, a rate's conversion, an offer moved by an
LP click, a currency relabelled, a delete), checked per hour and currency by `verify` and repaired,
made again by `rebuild`; a history report joins them to their clicks inside DuckDB and agrees with the
row store's raw report to the last conversion. Both backends, real files."""

from __future__ import annotations

import random
import threading

import pytest
from conftest import wait_until

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.reporting.currency import relabel_report_currency, set_rates
from models.reporting.history import (
    HistoryFiles,
    append_history,
    history_status,
    rebuild_history,
    verify_history,
)
from models.reporting.reports import ReportQuery, run_report
from models.store.clicks import ClickStore
from models.store.conversions import ConversionStore
from models.store.database import connect, write_tx
from models.store.duckdb.connection import open_history
from models.store.history import CONVERSION_COLUMNS, HistoryStore
from models.store.meta import MetaStore
from models.store.reports import ReportStore
from models.store.retention import RetentionStore
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
SHAPES = [
    dict(group_by=("sub_id_1",)),
    dict(group_by=("day", "country"), timezone="Asia/Kolkata"),
    dict(group_by=("offer",), filters={"country": ("US", "DE", "GB")}),
    dict(group_by=("referrer_domain",), filters={"campaign": ("1",)}),
]


@pytest.fixture
def files(settings) -> HistoryFiles:
    return HistoryFiles(settings.history_path, settings.history_memory_limit)


def subids(db) -> list[str]:
    return [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]


def convert(db, clicks: list[str], seed: int) -> None:
    """A postback for each click, leads and sales in three currencies (JPY without a rate)."""
    rng = random.Random(seed)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    for subid in clicks:
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale"]),
            "payout": f"{rng.uniform(1, 30):.2f}",
            "currency": rng.choice(["", "EUR", "JPY"]),
        }
        recorder.record(parse_postback(params), RECEIVED)


def history_conversions(files: HistoryFiles) -> list[tuple]:
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        columns = ", ".join(CONVERSION_COLUMNS)
        return conn.execute(f"SELECT {columns} FROM conversion ORDER BY id").fetchall()


def row_store_conversions(db) -> list[tuple]:
    store = HistoryStore(db.connection())
    return store.conversion_rows_after(0, store.max_conversion_id(), 10**9)


def first_click_id(db, subid: str) -> int:
    return db.connection().execute("SELECT id FROM click WHERE subid = ?", (subid,)).fetchone()[0]


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


def test_conversions_are_copied_once_and_copied_again_as_they_change(db, files):
    generate_clicks(db, 300, 2, campaigns=2, seed=21)
    lander = subids(db)[1]
    with write_tx(db):  # A click sent to a lander, converted before its LP click lands.
        db.connection().execute("UPDATE click SET lander_id = 1 WHERE subid = ?", (lander,)).close()
    convert(db, subids(db)[:80], seed=1)
    result = append_history(db, files, chunk=30)
    assert (result.conversions, result.reconverted) == (80, 0)
    assert history_conversions(files) == row_store_conversions(db)
    # A kill after DuckDB's commit, before the row store's: DuckDB ahead of what readers trust.
    with write_tx(db):
        HistoryStore(db.connection()).set_conversion_position(40)
    convert(db, subids(db)[80:100], seed=2)
    assert append_history(db, files, chunk=30).conversions == 20  # On from DuckDB's own 80.
    assert history_conversions(files) == row_store_conversions(db)  # No duplicate, none lost.
    store = HistoryStore(db.connection())
    assert store.conversion_state()[0] == store.max_conversion_id()

    conn = db.connection()
    relabel_report_currency(db, "GBP")  # Every USD conversion is said to be in GBP: all queued.
    relabelled = conn.execute("SELECT COUNT(*) FROM conversion WHERE currency = 'GBP'").fetchone()[0]
    assert HistoryStore(conn).pending_conversions() == relabelled > 0
    first = subids(db)[0]
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    recorder.record(parse_postback({"subid": first, "status": "rejected"}), RECEIVED)  # A status change.
    set_rates(db, {"JPY": 0.0067})  # The JPY conversions get their report payout.
    assert HistoryStore(conn).pending_conversions() > relabelled
    with write_tx(db):  # The LP click moves the click's conversion to the offer it chose.
        assert ClickStore(conn).land_lp_clicks([(lander, 1_000, 77)], 1_000)
    moved = conn.execute("SELECT id FROM conversion WHERE subid = ?", (lander,)).fetchone()[0]
    gone = row_store_conversions(db)[-1][0]
    with write_tx(db):  # A delete (no command deletes one yet): queued as a change, its copy deleted.
        HistoryStore(conn).record_conversion_changes([gone])
        conn.execute("DELETE FROM conversion WHERE id = ?", (gone,)).close()
    queued = HistoryStore(conn).pending_conversions()
    result = append_history(db, files)
    assert (result.conversions, result.reconverted) == (0, queued)
    assert HistoryStore(conn).pending_conversions() == 0
    assert history_conversions(files) == row_store_conversions(db)
    assert gone not in {row[0] for row in history_conversions(files)}
    offer = CONVERSION_COLUMNS.index("offer_id")
    assert {row[0]: row[offer] for row in history_conversions(files)}[moved] == 77

    files.path.unlink()  # A lost file: made again, its conversions with it.
    assert append_history(db, files).conversions == len(row_store_conversions(db))
    assert history_conversions(files) == row_store_conversions(db)


def test_verify_compares_conversions_per_hour_and_currency_and_repair_and_rebuild_copy_them(db, files):
    generate_clicks(db, 200, 1, campaigns=2, seed=22)
    convert(db, subids(db)[:60], seed=3)
    append_history(db, files)
    result = verify_history(db, files)
    assert result.is_consistent and result.conversion_hours > 0 and not result.conversion_mismatches
    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        conn.execute("DELETE FROM conversion WHERE id = (SELECT MIN(id) FROM conversion)")
        conn.execute("UPDATE conversion SET payout = payout + 1 WHERE id = (SELECT MAX(id) FROM conversion)")
    result = verify_history(db, files)
    assert not result.is_consistent and not result.mismatches
    assert {(m.history_conversions - m.row_conversions) for m in result.conversion_mismatches} <= {-1, 0}
    assert any(m.history_payout == pytest.approx(m.row_payout + 1) for m in result.conversion_mismatches)
    repaired = verify_history(db, files, repair=True)
    assert repaired.is_consistent and repaired.conversions_repaired == len(
        {m.hour for m in result.conversion_mismatches}
    )
    assert history_conversions(files) == row_store_conversions(db)
    assert rebuild_history(db, files).conversions == 60
    assert history_conversions(files) == row_store_conversions(db)
    assert verify_history(db, files).is_consistent
    # A file from before conversions were copied: reports count the row store's (saying why) until
    # the next append copies them all.
    with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
        conn.execute("DROP TABLE conversion")
        conn.execute("DELETE FROM history_meta WHERE key = 'conversion_position'")
    query = ReportQuery(preset="all_time", group_by=("sub_id_1",))
    assert "holds conversions up to id 0" in run_report(db, query, history=files).fallback
    assert history_status(db, files)["history_conversions"] is None
    assert append_history(db, files).conversions == 60
    assert run_report(db, query, history=files).fallback is None
    assert history_conversions(files) == row_store_conversions(db)


def test_history_reports_join_conversions_in_duckdb_and_agree_with_raw(db, files):
    generate_clicks(db, 600, 3, campaigns=2, seed=23)
    convert(db, subids(db)[::4], seed=4)  # 150 converted clicks, over the whole range.
    append_history(db, files)
    clicks = subids(db)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    for subid in clicks[:12:4]:  # Copied conversions changed since: queued, read from the row store.
        recorder.record(parse_postback({"subid": subid, "status": "sale", "payout": "7"}), RECEIVED)
    with write_tx(db):  # A converted click changed since: its conversions are the row store's to read.
        ConversionStore(db.connection()).set_sub_id(first_click_id(db, clicks[4]), 1, "moved")
    convert(db, clicks[1:40:4], seed=5)  # New ones past the conversion position.
    raw = [run_report(db, ReportQuery(preset="all_time", source="raw", **shape)) for shape in SHAPES]
    assert raw[0].total["conversions"] > 150 and raw[0].unconverted  # JPY waits for a rate.

    def agree(expected: list) -> None:
        for shape, before in zip(SHAPES, expected, strict=True):
            for source in ("history", "auto"):
                report = run_report(db, ReportQuery(preset="all_time", source=source, **shape), history=files)
                assert report.fallback is None, (shape, source)
                assert source == "auto" or report.sources == ["history"], shape
                assert rows_of(report) == rows_of(before), (shape, source)
                assert report.total == pytest.approx(before.total), (shape, source)
                assert report.unconverted == before.unconverted, (shape, source)

    agree(raw)
    append_history(db, files)
    agree(raw)
    # As LANNER_RAW_RETENTION leaves them: campaign 1's unconverted clicks gone once copied; and
    # (as `lanner prune` would) its converted ones too. Their conversions are the history's own now:
    # no list of them travels from the row store.
    cutoff = 2**62
    with write_tx(db):
        RetentionStore(db.connection()).delete_clicks_before(1, cutoff, 10**6)
        MetaStore(db.connection()).move_pruned_before(cutoff)
    store, history = ReportStore(db.connection()), HistoryStore(db.connection())
    positions = (history.state()[0], history.conversion_state()[0])
    assert len(store.orphan_conversions(0, cutoff, {})) > 30
    assert store.orphan_conversions(0, cutoff, {}, after=positions) == []
    agree(raw)


# PostgreSQL's ids are not in commit order; SQLite has one writer.
@pytest.mark.postgresql_only
def test_postgres_a_conversion_inserter_open_past_the_watermark_read_is_not_skipped(
    db, files, settings, backend
):
    generate_clicks(db, 20, 1, campaigns=1, seed=24)
    first, second = subids(db)[:2]
    slow = connect(settings.database_url)
    try:
        slow_tx = slow.atomic()
        slow_tx.__enter__()  # A postback's transaction: its conversion takes an id, then it waits.
        conversions = ConversionStore(slow.connection())
        click_id, campaign_id, stream_id, offer_id, created_at = conversions.find_click(first)
        conversions.insert(
            first,
            "",
            "lead",
            "",
            "",
            3.0,
            "USD",
            3.0,
            0.0,
            click_id,
            campaign_id,
            stream_id,
            offer_id,
            created_at,
            created_at + 1,
        )
        convert(db, [second], seed=6)  # Another's: a higher id, committed first.
        results: list = []
        appender = threading.Thread(target=lambda: results.append(append_history(db, files)))
        appender.start()
        waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        wait_until(
            lambda: not appender.is_alive() or db.connection().execute(waiting).fetchone()[0] == 1,
            60,
            "the appender to wait for the open transaction (or to finish without it)",
        )
        slow_tx.__exit__(None, None, None)  # Commit.
        appender.join(60)
    finally:
        slow.close()
    append_history(db, files)  # Without the lock the held conversion's id is below the position: lost.
    assert results and results[0].conversions == 2
    assert history_conversions(files) == row_store_conversions(db)
