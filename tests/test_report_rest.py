"""What the row store adds to a report DuckDB sums (its rest: models/store/reports.py `raw_clicks` with
`after`, models/store/duckdb/reports.py `_summed`): clicks landed past the history's position, a copied
click changed since (queued for a copy again), conversions past the conversion position and a copied
one changed since, all in one report; its page, its streamed CSV rows and the raw report agree to the
last number. The rest read by id (few clicks past the position) and through the range's index (a
history far behind) are the same rows. On both backends."""

from __future__ import annotations

import random

import pytest

from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
from models.migrations.deferred import run_deferred
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reportpage import PageQuery, page_report
from models.reporting.reports import ReportQuery, run_report
from models.reporting.reportstream import stream_report
from models.store.conversions import ConversionStore
from models.store.database import read_tx, write_tx
from models.store.duckdb.reports import id_ranges
from models.store.history import HistoryStore
from models.store.reports import ReportStore
from workers.bench.generate import generate_clicks

RECEIVED = Received("GET", "127.0.0.1", "test")
SHAPES = [
    dict(group_by=("sub_id_1",), filters={"campaign": ("1",)}),
    dict(group_by=("day", "sub_id_1"), timezone="Asia/Kolkata"),
    dict(group_by=("network",), filters={"sub_id_1": tuple(str(zone) for zone in range(1000, 1010))}),
    dict(group_by=("campaign", "sub_id_1"), filters={"campaign": ("2",)}),  # A rule's.
]


def rounded(rows: list[dict]) -> list[dict]:
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in rows]


def postback(recorder: ConversionRecorder, subid: str, rng: random.Random, status: str = "") -> None:
    params = {
        "subid": subid,
        "status": status or rng.choice(["lead", "sale"]),
        "payout": f"{rng.choice([0.25, 1.5, 3, 12.75])}",  # Exact in binary: sums in any order agree.
    }
    recorder.record(parse_postback(params), RECEIVED)


def test_a_report_counts_every_kind_of_row_the_history_does_not_answer_for_once(db, settings):
    generate_clicks(db, 300, 3, campaigns=2, seed=31, zone_count=20)
    run_deferred(db)
    rng = random.Random(8)
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    copied = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()]
    for subid in copied[::5]:
        postback(recorder, subid, rng, "lead")
    files = HistoryFiles.of(settings)
    append_history(db, files)
    # After the append: clicks past the position, a copied click and a copied converted click changed,
    # a copied conversion's status changed, new conversions of copied and of new clicks.
    generate_clicks(db, 40, 1, campaigns=2, seed=32, zone_count=20)
    conn = db.connection()
    ids = dict(db.execute_sql("SELECT subid, id FROM click").fetchall())
    with write_tx(db):
        ConversionStore(conn).set_sub_id(ids[copied[7]], 1, "1003")
        ConversionStore(conn).set_sub_id(ids[copied[10]], 1, "moved")  # Converted: its conversion too.
    recorder.record(
        parse_postback({"subid": copied[5], "status": "sale", "payout": "7"}), RECEIVED
    )  # Lead -> sale.
    landed = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id").fetchall()][300:]
    for subid in [*copied[1:60:6], *landed[::4]]:
        postback(recorder, subid, rng)
    history = HistoryStore(conn)
    with read_tx(db):
        position, conversion_position = history.state()[0], history.conversion_state()[0]
        assert history.changes(0, position, 100) and history.conversion_changes(0, conversion_position, 100)
    assert conn.execute("SELECT COUNT(*) FROM click WHERE id > ?", (position,)).fetchall() == [(40,)]
    past = conn.execute("SELECT COUNT(*) FROM conversion WHERE id > ?", (conversion_position,)).fetchall()
    assert past[0][0] > 10

    for shape in SHAPES:
        raw = run_report(db, ReportQuery(preset="all_time", source="raw", **shape))
        query = ReportQuery(preset="all_time", source="history", **shape)
        page = page_report(db, query, PageQuery(limit=10**6), history=files)
        assert page.sources == ["history"], shape
        assert rounded(page.rows) == rounded(raw.rows), shape
        assert page.total == pytest.approx(raw.total) and page.row_count == len(raw.rows), shape
        stream = stream_report(db, query, history=files)
        assert stream.streamed, shape
        assert rounded(list(stream.rows)) == rounded(raw.rows), shape
        assert stream.total == pytest.approx(raw.total), shape
        if "day" in shape["group_by"]:  # Every click and conversion.
            assert raw.total["clicks"] == 340 and raw.total["conversions"] > 70

    # The rest read by id and through the range's index: the same sums, whatever the shape.
    store = ReportStore(conn)
    with read_tx(db):
        for shape in SHAPES:
            groups = tuple(name for name in shape["group_by"] if name != "day")
            # A filter's values as its column holds them (ids as ints), as every report passes them.
            filters = {
                name: tuple(int(v) for v in values) if name == "campaign" else values
                for name, values in shape.get("filters", {}).items()
            }
            sql = store.piece_sql(groups, filters, 86_400_000 if "day" in shape["group_by"] else None)
            sums = []
            for is_near in (True, False):
                statement, params = sql.raw_clicks(0, 2**62, position, is_near=is_near)
                summed: dict[tuple, list] = {}
                width = len(groups) + (1 if "day" in shape["group_by"] else 0)
                for row in conn.execute(statement, params).fetchall():
                    total = summed.setdefault(tuple(row[:width]), [0] * (len(row) - width))
                    total[:] = [a + (b or 0) for a, b in zip(total, row[width:], strict=True)]
                sums.append(summed)
            assert sums[0] == sums[1] and sums[0], shape
            assert sum(total[0] for total in sums[0].values()) >= (2 if shape.get("filters") else 42), shape


def test_converted_click_ids_are_named_each_or_as_spans_where_many_are_near():
    assert id_ranges("c.id", []) == "false"
    assert id_ranges("c.id", [5, 200_000]) == "c.id IN (5, 200000)"
    near = [*range(1, 40), *range(300_000, 300_020)]  # 59 ids, two spans.
    assert id_ranges("c.id", near) == "(c.id BETWEEN 1 AND 39 OR c.id BETWEEN 300000 AND 300019)"
