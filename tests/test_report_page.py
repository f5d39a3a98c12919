"""One page of a report (models/reporting/reportpage.py) equals the whole report sorted and cut in
Python: sorted by several metrics and by the group's label, both ways, with a second key, from an
offset, with the row count, the totals over every row and the total less chosen rows; on the raw path
(run_report's rows cut) and the history path (DuckDB sums, sorts and cuts), in a timezone half an hour
off UTC hours. The admin API pages a report and refuses a bad page with 400. On both backends."""

from __future__ import annotations

import random
import time

import falcon.testing
import pytest

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reportpage import PageQuery, page_report
from models.reporting.reports import ReportQuery, run_report
from models.reporting.summary import total_without
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
ZONES = tuple(str(zone) for zone in range(1000, 1025))  # Not a rollup's dimension: DuckDB sums.
SHAPES = [
    dict(group_by=("sub_id_1",)),
    dict(group_by=("offer",), filters={"sub_id_1": ZONES}),
    dict(group_by=("network",), filters={"sub_id_1": ZONES}),
    dict(group_by=("hour",), filters={"sub_id_1": ZONES, "campaign": ("2",)}),
    dict(group_by=("country", "sub_id_1")),
]
SORTS = [
    (),
    (("clicks", True),),
    (("roi", False), ("clicks", True)),
    (("revenue", True), ("group", False)),
    (("group", True),),
    (("group", False), ("cr", True)),
    (("cpa", True), ("lp_ctr", False)),
]
PAGES = [(0, 1000), (0, 7), (5, 4), (10**6, 10)]


def label(value, name: str) -> str:
    """A label whose case differs from its value's (casefold is what sorts) and that ties ids."""
    return "(none)" if value is None else (name.upper() if name else f"#{str(value).swapcase()}")


def by_rule(whole: list[dict], column: str, sort, is_time: bool) -> list[dict]:
    """The page's rule, applied to every row of the whole report: stable sorts, the last key first."""
    rows = whole
    for key, is_descending in reversed(sort):
        if key == "group" and is_time:  # In time order: the whole report's.
            rows = sorted(rows, key=lambda row: [id(r) for r in whole].index(id(row)), reverse=is_descending)
        elif key == "group":
            shown = [(label(row[column], row.get(f"{column}_name") or ""), row) for row in rows]
            shown.sort(key=lambda item: (item[0].casefold(), item[0]), reverse=is_descending)
            rows = [row for _, row in shown]
        else:
            present = sorted(
                (r for r in rows if r[key] is not None), key=lambda r: r[key], reverse=is_descending
            )
            rows = present + [r for r in rows if r[key] is None]
    return rows


def rounded(row: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


@pytest.fixture
def history(db, settings) -> HistoryFiles:
    """400 clicks over four days (two campaigns), 90 converted (some in a currency without a rate),
    copied into the history."""
    generate_clicks(db, 400, 4, campaigns=2, seed=11, zone_count=30)
    run_deferred(db)
    rng = random.Random(5)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in rng.sample(subids, 90):
        params = {
            "subid": subid,
            "status": rng.choice(["lead", "sale"]),
            "payout": f"{rng.choice([0.25, 1.5, 3, 12.75])}",  # Exact in binary: sums in any order agree.
            "currency": rng.choice(["", "", "", "JPY"]),
        }
        recorder.record(parse_postback(params), RECEIVED)
    files = HistoryFiles.of(settings)
    append_history(db, files)
    return files


def prune_and_land(db) -> None:
    """Campaign 1's copied clicks deleted from the row store (as LANNER_RAW_RETENTION leaves them, their
    conversions kept), and 50 more clicks landed that the history has not copied."""
    from models.store.database import write_tx
    from models.store.meta import MetaStore
    from models.store.retention import RetentionStore

    cutoff = int(time.time() * 1000) + 1
    with write_tx(db):
        RetentionStore(db.connection()).delete_clicks_before(1, cutoff, 10**6)
        MetaStore(db.connection()).move_pruned_before(cutoff)
    generate_clicks(db, 50, 1, campaigns=2, seed=12, zone_count=30)


def test_a_page_is_the_whole_report_sorted_and_cut_and_the_api_pages(db, settings, history):
    for source in ("raw", "history"):
        if source == "history":
            prune_and_land(db)
        for shape in SHAPES if source == "history" else SHAPES[::3]:
            query = ReportQuery(preset="all_time", timezone="Asia/Kolkata", source=source, **shape)
            whole = run_report(db, query, history=history if source == "history" else None)
            column = whole.columns[0]
            single = len(shape["group_by"]) == 1
            assert len(whole.rows) >= (8 if shape["group_by"][0].startswith(("sub_id", "hour")) else 1), shape
            ticked = [row[column] for row in whole.rows[1:6:2]]
            without = tuple("0" if value is None else str(value) for value in ticked) if single else ()
            # Each shape a turn of the sorts and pages (every one of them over the shapes: cheap in CPU).
            turn = SHAPES.index(shape)
            sorts = [SORTS[(turn + k) % len(SORTS)] for k in range(4 if source == "history" else 3)]
            for n, sort in enumerate(sorts if single else SORTS[1:3]):
                ordered = by_rule(whole.rows, column, sort, shape["group_by"][0] == "hour")
                for offset, limit in [PAGES[(turn + n) % len(PAGES)]]:
                    page = PageQuery(sort=sort, limit=limit, offset=offset, without=without, label=label)
                    got = page_report(db, query, page, history=history)
                    what = (source, shape, sort, offset, limit)
                    assert got.sources == (["history"] if source == "history" else ["raw"]), what
                    assert [rounded(r) for r in got.rows] == [
                        rounded(r) for r in ordered[offset : offset + limit]
                    ], what
                    assert got.row_count == len(whole.rows), what
                    assert got.total == pytest.approx(whole.total), what
                    assert got.columns == whole.columns and got.notes == whole.notes, what
                    if without:
                        left_out = [row for row in whole.rows if row[column] in ticked]
                        assert got.total_less == pytest.approx(total_without(whole.total, left_out)), what
                        assert got.total_less["clicks"] < got.total["clicks"], what
            assert whole.unconverted, shape
    api_pages_and_refuses_a_bad_page(db, settings, history)


def api_pages_and_refuses_a_bad_page(db, settings, history):
    """(In the test above: one fixture a backend.)"""
    from app import create_admin_app
    from models.conversions.postbacks import read_secret

    client = falcon.testing.TestClient(create_admin_app(settings, db=db))
    key = {"X-Api-Key": read_secret(db, "api_key")}
    whole = run_report(db, ReportQuery(group_by=("sub_id_1",), preset="all_time"), history=history)
    ordered = by_rule(whole.rows, "sub_id_1", (("clicks", True), ("roi", False)), False)
    params = {"group": "sub_id_1", "preset": "all_time", "sort": "-clicks,roi", "limit": "5", "offset": "3"}
    answer = client.simulate_get("/api/v1/reports", params=params, headers=key)
    assert answer.status_code == 200, answer.text
    assert answer.json["row_count"] == len(whole.rows) and answer.json["sources"] == ["history"]
    assert [rounded(row) for row in answer.json["rows"]] == [rounded(row) for row in ordered[3:8]]
    assert answer.json["total"] == pytest.approx(whole.total)
    unpaged = client.simulate_get(
        "/api/v1/reports", params={"group": "sub_id_1", "preset": "all_time"}, headers=key
    )
    assert "row_count" not in unpaged.json and len(unpaged.json["rows"]) == len(whole.rows)
    for bad in (
        {"limit": "0"},
        {"limit": "ten"},
        {"limit": "100001"},
        {"offset": "-1"},
        {"offset": "x"},
        {"sort": "clicks,clicks"},
        {"sort": "nonsense"},
        {"sort": "-clicks,roi,cr"},
        {"sort": "group", "group": "country,sub_id_1"},
    ):
        answer = client.simulate_get("/api/v1/reports", params={**params, **bad}, headers=key)
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.json["description"], bad
