"""The click and conversion logs name streams and offers (ids beside them), the conversion log's CSV is
what the log shows with its filters, streamed, and the dashboard's top offers names the clicks that
reached no offer. In process, on real clicks through a lander (the web app's tracker, then the spool
flushed) and real conversions."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import csv
import io
import re
import time
import urllib.parse

from conftest import Clock, InProcessApp, click, request
from test_panel import clicks, get, log_in, make_panel, own, panel, users  # noqa: F401
from test_panel_logs import imported, stored_subids, subids, walk

BROWSER = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"


def landed(db, app_client, lanner) -> dict:
    """A campaign whose stream `Main way` sends visitors to a lander, then to offer `=Blue Widget` (a
    name a spreadsheet would run); four clicks, one of them through to the offer."""
    from models.admin.landers import create_lander
    from models.admin.services import create_campaign, create_offer, list_streams, update_stream

    lander = create_lander(db, "Quiz", url="https://lp.example/?s={subid}&go={offer}")
    offer = create_offer(db, "=Blue Widget", "https://blue.example/?s={subid}", payout=4)
    campaign = create_campaign(db, "Blue", "blue", offer_id=offer.id, landers=[(lander.id, 100)])
    (stream,) = list_streams(db, campaign.id)
    update_stream(db, stream.id, name="Main way")
    views = []
    for n in range(4):
        status, headers, _ = click(app_client, "blue", ip=f"198.51.100.{n + 1}", ua=BROWSER)
        assert status == 302
        views.append(urllib.parse.parse_qs(urllib.parse.urlsplit(headers["location"]).query))
    go = urllib.parse.urlsplit(views[0]["go"][0])
    assert request(app_client, f"{go.path}?{go.query}", {"User-Agent": BROWSER})[0] == 302
    lanner("spool", "flush")
    return {"campaign": campaign, "stream": stream, "offer": offer, "through": views[0]["s"][0]}


def named(kind: str, id_: int, name: str) -> str:
    return f'<span class="named" title="{kind} {id_}">{name}</span> <small class="id">#{id_}</small>'


def cells(html: str, cls: str) -> list[str]:
    return re.findall(rf'<td class="{cls}">(.*?)</td>', html)


def test_the_logs_name_streams_and_offers_with_their_ids_beside(panel, users, db, app_client, lanner):
    seeded = landed(db, app_client, lanner)
    stream_id, offer_id = seeded["stream"].id, seeded["offer"].id
    admin = log_in(panel)
    html = get(panel, "/panel/clicks", admin)[2]
    named_stream = named("stream", stream_id, "Main way")
    assert cells(html, "stream") == [named_stream] * 4
    # Only the click that went through the lander reached the offer.
    named_offer = named("offer", offer_id, "=Blue Widget")
    assert sorted(cells(html, "offer")) == sorted([named_offer] + ["–"] * 3)
    html = get(panel, f"/panel/clicks/{seeded['through']}", admin)[2]
    assert f'<a href="/panel/offers/{offer_id}">{named_offer}</a>' in html
    assert (
        f'<a href="/panel/campaigns/{seeded["campaign"].id}/streams/{stream_id}">{named_stream}</a>' in html
    )
    imported(db, [seeded["through"]])
    html = get(panel, "/panel/conversions", admin)[2]
    assert cells(html, "stream") == [named_stream] and cells(html, "offer") == [named_offer]
    conversion_id = re.search(r'href="/panel/conversions/(\d+)">Open', html).group(1)
    page = get(panel, f"/panel/conversions/{conversion_id}", admin)[2]
    assert f"<td>{named_stream}</td>" in page and f"<td>{named_offer}</td>" in page
    # The CSV names them too, the offer's name kept from running as a formula.
    _, _, rows = read_csv(panel, admin)
    assert rows[1][9:13] == ["Main way", str(stream_id), "'=Blue Widget", str(offer_id)]
    # An offer gone from the database is named so, not left blank.
    from models.tables.offer import Offer

    Offer.update(name="").where(Offer.id == offer_id).execute()
    html = get(panel, "/panel/conversions", admin)[2]
    assert cells(html, "offer") == [f'<span class="named" title="offer {offer_id}">#{offer_id}</span>']


def test_the_dashboard_names_the_clicks_that_reached_no_offer(panel, users, db, app_client, lanner):
    landed(db, app_client, lanner)
    html = get(panel, "/panel", log_in(panel))[2]
    table = html[html.index('<table class="offers">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr><td>(.*?)</td><td class=\"n\">([0-9,]+)</td>", table)
    assert [(re.sub(r"<[^>]+>", "", label).strip(), count) for label, count in rows] == [
        ("No offer lander views not clicked through, capped and default-action clicks", "3"),
        ("=Blue Widget", "1"),
    ]


def read_csv(panel, cookie, query: str = "") -> tuple[int, dict, list[list[str]]]:
    status, headers, body = request(panel, f"/panel/conversions.csv{query}", {"Cookie": cookie})
    return status, headers, list(csv.reader(io.StringIO(body.decode())))


def test_the_conversion_csv_is_the_log_as_shown_with_its_filters_every_page_of_it(panel, users, clicks, db):
    own(db, 2, users["frugal"])
    ones, twos = stored_subids(db, 1), stored_subids(db, 2)
    imported(db, ones[:30] + twos[:5])
    imported(db, ones[30:32], status="rejected", payout=0)
    admin = log_in(panel)
    html = get(panel, "/panel/conversions?status=sale&campaign=1&period=today", admin)[2]
    assert 'href="/panel/conversions.csv?campaign=1&amp;status=sale&amp;period=today"' in html
    status, headers, rows = read_csv(panel, admin, "?campaign=1&status=sale&period=today")
    assert status == 200 and headers["content-type"] == "text/csv; charset=utf-8"
    assert headers["content-disposition"] == 'attachment; filename="lanner-conversions.csv"'
    assert "content-length" not in headers  # Streamed, not rendered whole first.
    header, *body = rows
    assert header[:7] == ["Time", "Subid", "Tid", "Status", "Before", "First", "Network's word"]
    assert header[7:14] == ["Campaign", "Campaign id", "Stream", "Stream id", "Offer", "Offer id", "Network"]
    assert header[-4:] == ["Payout", "Currency", "In report currency", "Cost"]
    # Every page of the log, in its order.
    pages = walk(panel, admin, "/panel/conversions?status=sale&campaign=1&period=today&limit=7")
    assert [row[1] for row in body] == [subid for page in pages for subid in page] and len(body) == 30
    assert {(row[3], row[4], row[5], row[7], row[8], row[-4], row[-3]) for row in body} == {
        ("sale", "", "sale", "Generated 0", "1", "2.50", "USD")
    }
    assert all(row[9] and row[11] and row[10].isdigit() and row[12].isdigit() for row in body)
    assert [row[3] for row in read_csv(panel, admin, "?status=rejected")[2][1:]] == ["rejected"] * 2
    # A user who hides money gets no amounts; a campaign they may not see is a 404, as on the page.
    frugal = log_in(panel, "frugal")
    status, _, rows = read_csv(panel, frugal)
    assert status == 200 and "Payout" not in rows[0] and len(rows[0]) == 14
    assert sorted(row[1] for row in rows[1:]) == sorted(twos[:5])
    assert read_csv(panel, frugal, "?campaign=1")[0] == 404
    assert read_csv(panel, admin, "?period=forever")[0] == 400
    assert subids(get(panel, "/panel/conversions?campaign=2", frugal)[2]) == [row[1] for row in rows[1:]]


def streamed(app, path: str, cookie: str) -> list[bytes]:
    """A 200 answer's body as the WSGI app hands it out, piece by piece."""
    from falcon.testing import StartResponseMock, create_environ

    answer = StartResponseMock()
    environ = create_environ(path=path, headers={"Cookie": cookie}, remote_addr="127.0.0.1")
    pieces = [piece for piece in app(environ, answer) if piece]
    assert answer.status.startswith("200"), answer.status
    return pieces


def test_a_conversion_csv_longer_than_a_chunk_streams_every_row_once(env, users, clicks, db):
    from app import create_admin_app
    from models.conversions.manual import import_conversions
    from models.conversions.postbacks import ConversionRecorder
    from settings import load_settings

    # A chunk of 50 rows, not CSV_CHUNK's 1,000: 117 conversions cross it twice as 2,017 cross 1,000, and
    # each one imported is a postback's worth of statements (the import is not what is tested).
    chunk = 50
    clock = Clock(time.time())
    app = create_admin_app(load_settings(env), db=db, clock=clock, conversion_csv_chunk=chunk)
    panel = InProcessApp(app, clock)
    every = stored_subids(db)
    wanted = chunk * 2 + 17
    lines = ["subid,tid,status,payout"] + [f"{every[n % len(every)]},t{n},lead,1" for n in range(wanted)]
    import_conversions(ConversionRecorder(db, park_ms=3_600_000), "\n".join(lines))
    pieces = streamed(app, "/panel/conversions.csv", log_in(panel))
    assert len(pieces) == 3  # One piece per chunk read: 50, 50, then 17 rows.
    rows = list(csv.reader(io.StringIO(b"".join(pieces).decode())))
    tids = [row[2] for row in rows[1:]]
    assert len(tids) == wanted and len(set(tids)) == wanted
