"""A report streamed for a CSV export (models/reporting/reportstream.py) has run_report's rows and totals,
for every report shape, from the columnar history plus the clicks it has not copied yet and the
conversions of clicks only it holds; the APIs stream it as CSV (format=csv or Accept: text/csv); its
memory does not grow with its rows. On both backends."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import random
import time

import falcon.testing
import pytest

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ROLLUP_GROUPS, TIME_GROUPS, ReportQuery, run_report
from models.reporting.reportstream import rollups_answer, stream_report
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
SHAPES = [
    dict(group_by=("sub_id_1",)),
    dict(group_by=("day", "sub_id_2"), timezone="Asia/Kolkata"),
    dict(group_by=("hour",), timezone="America/St_Johns", preset="last_7_days"),
    dict(group_by=("country", "os"), filters={"campaign": ("1",)}),
    dict(group_by=("network", "country")),
    dict(group_by=("traffic_source", "offer"), filters={"country": ("US", "DE", "")}),
    dict(group_by=("referrer_domain",), filters={"sub_id_1": ("1000", "1001", "1002")}),
    dict(group_by=()),
    dict(group_by=("sub_id_2", "day")),  # The time group second: rows keyed and sorted in this order.
]


def rounded(rows) -> list[dict]:
    """Rows with floats to 4 places (a sum in another order), in one order."""
    out = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in rows]
    return sorted(out, key=lambda row: json.dumps(row, sort_keys=True, default=str))


@pytest.fixture
def history(db, settings) -> HistoryFiles:
    """500 clicks over three days, 100 converted (some twice, some in a currency without a rate),
    copied into the history; then campaign 1's copied clicks deleted from the row store (their
    conversions kept), and 60 clicks landed that the history has not copied."""
    from models.store.database import write_tx
    from models.store.meta import MetaStore
    from models.store.retention import RetentionStore

    generate_clicks(db, 500, 3, campaigns=2, seed=7, zone_count=40)
    run_deferred(db)
    rng = random.Random(3)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, 100):
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale"]),
            "payout": f"{rng.uniform(1, 30):.2f}",
            "currency": rng.choice(["", "", "JPY"]),
        }
        recorder.record(parse_postback(params), RECEIVED)
        if rng.random() < 0.3:
            recorder.record(parse_postback({**params, "status": "sale", "payout": "9.5"}), RECEIVED)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    cutoff = int(time.time() * 1000) + 1
    with write_tx(db):  # As `lanner prune` and LANNER_RAW_RETENTION leave it (docs/analytics.md).
        RetentionStore(db.connection()).delete_clicks_before(1, cutoff, 10**6)
        MetaStore(db.connection()).move_pruned_before(cutoff)
    generate_clicks(db, 60, 1, campaigns=2, seed=8, zone_count=40)
    return files


def test_a_streamed_report_has_the_report_s_rows_and_totals_in_every_shape(db, history):
    for shape in SHAPES:
        query = ReportQuery(**{"preset": "all_time", **shape})
        expected = run_report(db, query, history=history)
        stream = stream_report(db, query, history=history, chunk=7)
        # What the rollups answer is run_report's, as its page (rows per few-valued dimension); the
        # rest (a sub id, an OS, a referrer) DuckDB's, streamed.
        by_rollups = all(name in {*ROLLUP_GROUPS, *TIME_GROUPS} for name in (*query.group_by, *query.filters))
        assert stream.streamed == (not by_rollups) and rollups_answer(db, query) == by_rollups, shape
        assert stream.columns == expected.columns, shape
        rows = list(stream.rows)
        assert rounded(rows) == rounded(expected.rows), shape
        assert stream.total == pytest.approx(expected.total), shape
        assert stream.unconverted == expected.unconverted and stream.notes == expected.notes, shape
    assert expected.total["clicks"] == 560 and expected.unconverted
    assert [rollups_answer(db, ReportQuery(**shape)) for shape in SHAPES] == [
        False, False, True, True, True, True, False, True, False
    ]  # fmt: skip
    assert lock_is_free(history)  # Read to the end: the history's lock is let go.
    unread = stream_report(db, ReportQuery(group_by=("sub_id_1",), preset="all_time"), history=history)
    assert unread.streamed and not lock_is_free(history)
    del unread  # A response never sent (its rows never read) lets it go too.
    assert lock_is_free(history)


def lock_is_free(files: HistoryFiles) -> bool:
    """Whether an appender could take the history's lock now."""
    with open(files.path.with_name("history.lock"), "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(lock, fcntl.LOCK_UN)
        return True


def test_the_apis_stream_any_report_as_csv(db, settings, history):
    from app import create_admin_app
    from models.conversions.postbacks import read_secret

    client = falcon.testing.TestClient(create_admin_app(settings, db=db))
    key = {"X-Api-Key": read_secret(db, "api_key")}
    params = {"group": "country,sub_id_1", "preset": "all_time", "f.campaign": "1,2"}
    expected = run_report(
        db,
        ReportQuery(group_by=("country", "sub_id_1"), preset="all_time", filters={"campaign": ("1", "2")}),
        history=history,
    )
    for path, extra, headers in (
        ("/api/v1/reports", {"format": "csv"}, {}),
        ("/api/v1/reports", {}, {"Accept": "text/csv"}),
        ("/api/report", {"format": "csv"}, {}),
    ):
        answer = client.simulate_get(path, params={**params, **extra}, headers={**key, **headers})
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv"), (
            answer.text
        )
        assert json.loads(answer.headers["x-lanner-notes"]) == expected.notes
        written = list(csv.DictReader(io.StringIO(answer.text)))
        assert list(written[0]) == expected.columns
        as_text = [{k: "" if v is None else str(v) for k, v in row.items()} for row in expected.rows]
        assert rounded(written) == rounded(as_text), path
    assert client.simulate_get("/api/v1/reports", params=params, headers=key).json["rows"]  # JSON still.
    refused = client.simulate_get(
        "/api/v1/reports", params={**params, "group": "zone_size", "format": "csv"}, headers=key
    )
    assert refused.status_code == 400 and "zone_size" in refused.json["description"]


@pytest.mark.sqlite_only  # The row store only tells the history's position here.
def test_a_streamed_report_s_memory_does_not_grow_with_its_rows(db, settings, env):
    """40,000 sub id values written straight into the history: the peak RSS after the first 5,000 rows
    and after all 40,000 differ by less than the other 35,000 would take held (a report held in memory
    takes ~2 KB a row: its sums and its row). workers/bench/reportcsv.py runs it at a million."""
    from workers.bench.reportcsv import fill_history, measure

    fill_history(db, HistoryFiles.of(settings), 40_000)
    measured = measure(env, warm=5_000)
    assert measured["rows"] == 40_000 and measured["streamed"]
    growth = measured["rss_peak_kb"] - measured["rss_warm_kb"]
    assert growth < 12_000, measured  # KB


def test_a_report_duckdb_cannot_sum_is_read_the_slow_way_not_an_error(db, history, monkeypatch):
    """DuckDB out of memory while it sums (as on a big report under LANNER_HISTORY_MEMORY_LIMIT) is the
    history's own HistoryOutOfMemory, as everywhere else: the stream falls back to run_report's rows,
    where before the raw DuckDB error reached the CSV route as a 500."""
    import duckdb

    import models.reporting.reportstream as reportstream

    def out_of_memory(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of 262144 bytes")

    query = ReportQuery(group_by=("sub_id_1",), preset="all_time")
    expected = run_report(db, query, history=history)
    monkeypatch.setattr(reportstream, "stream_groups", out_of_memory)
    stream = stream_report(db, query, history=history)
    assert not stream.streamed
    assert rounded(stream.rows) == rounded(expected.rows) and expected.rows
    assert lock_is_free(history)  # The history's reading was closed on the way out.
