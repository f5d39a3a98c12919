# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
"""The click, conversion and postback logs sorted by two of their columns (routes/panel/logsort.py,
models/reporting/logorder.py): every page of a sort walked both ways is the order independent SQL and
Python give, ids named by their names, and the CSV says the same rows in the same order."""

from __future__ import annotations

import csv
import io
import re
import time
import urllib.parse

from conftest import Clock, InProcessApp
from test_panel import clicks, get, log_in, make_panel, own, panel, users  # noqa: F401
from test_panel_logs import imported, link, stored_subids, subids, walk

from routes.v1.pagination import encode_cursor


def ordered(rows: list[dict], keys: list[tuple[str, bool]]) -> list[dict]:
    """`rows` by `keys` ((field, descending); a None last either way), then id newest first."""
    rows = sorted(rows, key=lambda row: row["id"], reverse=True)
    for field, is_descending in reversed(keys):
        present = [row for row in rows if row[field] is not None]
        missing = [row for row in rows if row[field] is None]
        rows = sorted(present, key=lambda row: row[field], reverse=is_descending) + missing
    return rows


def table(db, sql: str) -> list[dict]:
    cursor = db.connection().execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def csv_column(app, path: str, cookie: str, header: str) -> list[str]:
    status, headers, text = get(app, path, cookie)
    assert status == 200, text
    rows = list(csv.DictReader(io.StringIO(text)))
    return [row[header].lstrip("'") for row in rows]


def streamed(app, path: str, cookie: str, query: str) -> list[bytes]:
    """A 200 answer's body as the WSGI app hands it out, piece by piece."""
    from falcon.testing import StartResponseMock, create_environ

    answer = StartResponseMock()
    environ = create_environ(
        path=path, query_string=query, headers={"Cookie": cookie}, remote_addr="127.0.0.1"
    )
    pieces = [piece for piece in app(environ, answer) if piece]
    assert answer.status.startswith("200"), answer.status
    return pieces


def cells(html: str, column: int) -> list[str]:
    """The text of one column of a page's table body."""
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[column]) for row in rows]


def named(db, rows: list[dict], kind: str) -> None:
    """Each row's `<kind>` name (lower case) beside its id, None without one, as the log sorts them."""
    names = {
        row["id"]: (row["name"] or f"#{row['id']}").lower()
        for row in table(db, f"SELECT id, name FROM {kind}")
    }
    for row in rows:
        found = row[f"{kind}_id"]
        row[kind] = None if found is None else (names[found], found)


def test_the_click_log_sorts_by_two_columns_names_not_ids_and_its_csv_follows(panel, users, clicks, db):
    rows = table(db, "SELECT id, subid, created_at, campaign_id, offer_id, country, browser FROM click")
    named(db, rows, "offer")
    admin = log_in(panel)
    by_country = [row["subid"] for row in ordered(rows, [("country", False), ("created_at", True)])]
    pages = walk(panel, admin, "/panel/clicks?sort=country,-time&limit=70")
    assert [s for page in pages for s in page] == by_country and len(pages) == 4
    # The CSV of that page is the whole sort, filters kept.
    assert csv_column(panel, "/panel/clicks.csv?sort=country,-time", admin, "Subid") == by_country
    # An offer sorts by its name, a click without one (a default action) last.
    by_offer = ordered(rows, [("offer", True), ("subid", False)])
    html = get(panel, "/panel/clicks?sort=-offer,subid&limit=500", admin)[2]
    assert subids(html) == [row["subid"] for row in by_offer]
    assert 'aria-sort="descending"' in html and 'data-sort="offer"' in html
    # Its headers: a click on Country makes it the first key and the offer the second.
    assert "sort=country%2C-offer" in html or "sort=country,-offer" in html
    # A buyer's sorted log holds their campaign's clicks only.
    own(db, 2, users["bert"])
    theirs = [row for row in rows if row["campaign_id"] == 2]
    expected = [row["subid"] for row in ordered(theirs, [("browser", True), ("created_at", False)])]
    buyer = log_in(panel, "bert")
    assert [
        s for page in walk(panel, buyer, "/panel/clicks?sort=-browser,time&limit=60") for s in page
    ] == expected
    assert csv_column(panel, "/panel/clicks.csv?sort=-browser,time", buyer, "Subid") == expected
    # Sorted by names when there are none (no offer yet): every row has none, so the newest first.
    from models.reporting.clicklog import ClickFilter, sorted_clicks
    from models.reporting.logorder import LogOrder, OrderKey

    page = sorted_clicks(db, ClickFilter(limit=5), LogOrder((OrderKey("offer_id", False, {}),)))
    assert [row["id"] for row in page.rows] == sorted((row["id"] for row in rows), reverse=True)[:5]
    # Bad sorts and cursors: one sentence, never a 500.
    for query in ("sort=nope", "sort=country,os,browser", "sort=country,country"):
        status, _, html = get(panel, f"/panel/clicks?{query}", admin)
        assert status == 400 and "Sort by" in html, query
    assert get(panel, "/panel/clicks.csv?sort=nope", admin)[0] == 400
    odd = (["US", 2**70, 5], ["US\x00", 1, 5], ["US", 1, None], ["US", True, 5], ["US", 1.5, "x"])
    for cursor in (encode_cursor(5), encode_cursor(["US", "x"]), "%%%", *map(encode_cursor, odd)):
        query = urllib.parse.urlencode({"sort": "country,-time", "cursor": cursor})
        assert get(panel, f"/panel/clicks?{query}", admin)[0] == 400, cursor


def test_the_conversion_log_sorts_by_two_columns_and_its_csv_follows(env, panel, users, clicks, db):
    every = stored_subids(db)
    imported(db, every[:30], status="sale", payout=2.5)
    imported(db, every[30:50], status="lead", payout=0.75)
    imported(db, every[50:60], status="rejected", payout=4)
    rows = table(db, "SELECT id, subid, status, payout, created_at, campaign_id FROM conversion")
    admin = log_in(panel)
    expected = [row["subid"] for row in ordered(rows, [("status", False), ("payout", True)])]
    pages = walk(panel, admin, "/panel/conversions?sort=status,-payout&limit=25")
    assert [s for page in pages for s in page] == expected and len(pages) == 3
    assert csv_column(panel, "/panel/conversions.csv?sort=status,-payout", admin, "Subid") == expected
    # Streamed a keyset chunk at a time: chunks of 2 (sorted: 20 rows a query) make three pieces.
    from app import create_admin_app
    from settings import load_settings

    clock = Clock(time.time())
    small = create_admin_app(load_settings(env), db=db, clock=clock, conversion_csv_chunk=2)
    pieces = streamed(
        small, "/panel/conversions.csv", log_in(InProcessApp(small, clock)), "sort=status,-payout"
    )
    assert len(pieces) == 3
    assert [
        row["Subid"].lstrip("'") for row in csv.DictReader(io.StringIO(b"".join(pieces).decode()))
    ] == expected
    by_campaign = ordered(rows, [("payout", False), ("subid", True)])
    csv_rows = csv_column(panel, "/panel/conversions.csv?sort=payout,-subid&campaign=1", admin, "Subid")
    assert csv_rows == [row["subid"] for row in by_campaign if row["campaign_id"] == 1]
    # A user who hides money cannot sort by what they do not see.
    own(db, 1, users["frugal"])
    frugal = log_in(panel, "frugal")
    assert get(panel, "/panel/conversions?sort=-payout", frugal)[0] == 400
    assert get(panel, "/panel/conversions.csv?sort=-payout", frugal)[0] == 400
    assert get(panel, "/panel/conversions?sort=status,-time", frugal)[0] == 200


def test_the_postback_log_sorts_each_tab_and_its_csv_follows(panel, users, clicks, db):
    from models.conversions.admin import add_target
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback

    add_target(db, "1", "https://source.example/cb?c={subid}", ["sale", "lead"])
    recorder = ConversionRecorder(db, park_ms=3_600_000)
    for n, subid in enumerate(stored_subids(db, 1)[:12]):
        status = ("sale", "lead", "rejected")[n % 3]
        recorder.record(
            parse_postback({"subid": subid, "status": status}), Received("GET", f"203.0.113.{n}", "/pb")
        )
    for n in range(3):  # Lanner subids no click has (yet): parked.
        subid = f"{n:016x}1"
        recorder.record(parse_postback({"subid": subid}), Received("GET", "198.51.100.7", "/pb"))
    admin = log_in(panel)
    postbacks = table(db, "SELECT id, subid, verdict, remote_ip, received_at FROM postback_log")
    expected = [row["subid"] for row in ordered(postbacks, [("verdict", False), ("remote_ip", True)])]

    seen, target = [], "?log=postbacks&sort=verdict,-from&limit=4"
    while target:
        html = get(panel, "/panel/postback-log" + target, admin)[2]
        seen += cells(html, 2)
        target = link(html, "next")
    assert seen == expected and len(seen) == 15
    got = csv_column(panel, "/panel/postback-log.csv?log=postbacks&sort=verdict,-from", admin, "Subid")
    assert got == expected
    # Outbound: by state, then the oldest first; the CSV alike.
    db.connection().execute("UPDATE postback_delivery SET state = 'failed' WHERE id % 2 = 0")
    deliveries = table(db, "SELECT id, state, created_at, conversion_id FROM postback_delivery")
    assert len(deliveries) > 4
    expected = [
        str(row["conversion_id"]) for row in ordered(deliveries, [("state", False), ("created_at", False)])
    ]
    html = get(panel, "/panel/postback-log?log=deliveries&sort=state,time", admin)[2]
    assert cells(html, 6) == expected
    got = csv_column(panel, "/panel/postback-log.csv?log=deliveries&sort=state,time", admin, "Conversion")
    assert got == expected
    assert get(panel, "/panel/postback-log?log=deliveries&sort=verdict", admin)[0] == 400


def test_the_sorted_click_log_reads_the_history_where_it_answers_and_the_row_store_the_rest(
    panel, users, clicks, db, settings, monkeypatch
):
    from models.reporting.clicklog import SORT_COLUMNS, ClickFilter, sorted_clicks
    from models.reporting.history import HistoryFiles, append_history
    from models.reporting.historyclicks import click_history
    from models.reporting.logorder import log_order
    from models.store.database import write_tx
    from models.store.duckdb.history import ColumnarHistory
    from models.store.history import HistoryStore
    from workers.bench.generate import generate_clicks

    files = HistoryFiles(settings.history_path, settings.history_memory_limit)
    admin = log_in(panel)
    # No history yet: the row store sorts every click, and the page says why.
    html = get(panel, "/panel/clicks?sort=country,-time&limit=5", admin)[2]
    assert 'id="history-note"' in html and "There is no click history" in html
    append_history(db, files)  # The 250 clicks, copied: the history answers for them.
    assert generate_clicks(db, 40, 1, campaigns=2, seed=9) == 40  # Past its position: the row store's.
    ids = [row["id"] for row in table(db, "SELECT id FROM click ORDER BY id")]
    # Changed since they were copied: the history's copy is stale, queued; and one past its position,
    # queued as an append that has closed its watermark but not copied yet queues it.
    queued = [*ids[:120:7], ids[-1]]
    with write_tx(db):
        HistoryStore(db.connection()).close_watermark()
        marks = ", ".join("?" * len(queued))
        db.connection().execute(f"UPDATE click SET country = 'ZZ' WHERE id IN ({marks})", queued)
        HistoryStore(db.connection()).record_changes(queued)
    asked: list[int] = []
    sorted_log = ColumnarHistory.sorted_log

    def spied(self, equal, **bounds):
        asked.append(bounds["up_to"])
        return sorted_log(self, equal, **bounds)

    monkeypatch.setattr(ColumnarHistory, "sorted_log", spied)
    rows = table(db, "SELECT id, subid, ip, created_at, campaign_id, offer_id, country FROM click")
    named(db, rows, "offer")
    by_country = ordered(rows, [("country", False), ("created_at", True)])
    pages = walk(panel, admin, "/panel/clicks?sort=country,-time&limit=70")
    assert [s for page in pages for s in page] == [row["subid"] for row in by_country]
    assert len(pages) == 5 and asked and set(asked) == {ids[249]}
    html = get(panel, "/panel/clicks?sort=country,-time&limit=70", admin)[2]
    assert 'id="history-note"' not in html
    # The CSV follows the same path; each click's IP is the row store's, read for the rows shown.
    asked.clear()
    by_offer = ordered(rows, [("offer", True), ("created_at", False)])
    path = "/panel/clicks.csv?sort=-offer,time"
    assert csv_column(panel, path, admin, "Subid") == [row["subid"] for row in by_offer]
    assert csv_column(panel, path, admin, "IP") == [row["ip"] for row in by_offer] and asked
    # One campaign from a minute on (the UTC timezone), straight from the model, page by page.
    since = min(row["created_at"] for row in rows) + 6 * 3_600_000
    start = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(since // 1000 + 60))
    theirs = [
        row for row in rows if row["campaign_id"] == 2 and row["created_at"] >= (since // 60_000 + 1) * 60_000
    ]
    expected = [row["subid"] for row in ordered(theirs, [("offer", False), ("country", True)])]
    order = log_order([("offer", False), ("country", True)], None, SORT_COLUMNS)
    seen, history = [], click_history(settings)
    while True:
        page = sorted_clicks(db, ClickFilter(campaign_id=2, since=start, limit=16), order, history)
        seen += [row["subid"] for row in page.rows]
        if page.after is None:
            break
        order = order.with_after(page.after)
    assert seen == expected and len(expected) > 16 and page.fallback is None
    # A buyer's campaigns, every click: the tail past the position read by id (not by the campaign
    # index), merged in the same order.
    theirs = [row for row in rows if row["campaign_id"] in (2, 7)]
    expected = [row["subid"] for row in ordered(theirs, [("country", False), ("created_at", True)])]
    order = log_order([("country", False), ("time", True)], None, SORT_COLUMNS)
    seen = []
    while True:
        page = sorted_clicks(db, ClickFilter(campaign_ids=(2, 7), limit=16), order, history)
        seen += [row["subid"] for row in page.rows]
        if page.after is None:
            break
        order = order.with_after(page.after)
    assert seen == expected and any(row["id"] > ids[249] for row in theirs) and page.fallback is None
    # A damaged history: the row store answers, in the same order, and the page says why.
    files.path.write_bytes(b"not a DuckDB file" * 100)
    html = get(panel, "/panel/clicks?sort=country,-time&limit=500", admin)[2]
    assert subids(html) == [row["subid"] for row in by_country] and 'id="history-note"' in html
