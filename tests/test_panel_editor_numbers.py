"""The campaign editor's numbers per stream and per offer (routes/panel/editornumbers.py), in process on a
real migrated database: clicks tracked through the real pipeline two days ago and today, conversions
imported, each number on the page checked against SQL over the click and conversion rows; the caps'
usage ("5 / 5", reached), the share served beside the weight's, hide-money and a buyer's access."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import html as htmllib
import re
import time

import pytest
from conftest import Clock
from test_panel import get, log_in, make_panel, own, panel, users  # noqa: F401

DAY = 86_400


@pytest.fixture
def served(db, settings, make_tracker):
    """Campaign `spring`: stream 1 to offers Main (weight 3) and Capped (weight 1, 5 clicks a day, 40 in
    all); 12 clicks two days ago and 30 today, conversions on 4 of today's clicks of Main."""
    from test_panel_logs import imported

    from models.admin.services import create_campaign, create_offer, list_streams, update_stream
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.tables.click import Click

    main = create_offer(db, "Main Offer", "https://main.example/?s={subid}", payout=2)
    capped = create_offer(db, "Capped Offer", "https://capped.example/?s={subid}", daily_cap=5, total_cap=40)
    campaign = create_campaign(db, "Spring", "spring", offer_id=main.id)
    stream = list_streams(db, campaign.id)[0]
    update_stream(db, stream.id, offers=[(main.id, 3), (capped.id, 1)])
    clock = Clock(time.time() - 2 * DAY)
    tracker = make_tracker(clock=clock)
    tracker.refresh()
    for n in range(42):
        if n == 12:
            clock.now = time.time()
        tracker.track(tracker.campaign("spring"), Visit(ip=f"198.51.100.{n + 1}", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    today_start = int((time.time() // DAY) * DAY * 1000)
    todays_main = [
        c.subid for c in Click.select().where(Click.offer_id == main.id, Click.created_at >= today_start)
    ]
    imported(db, todays_main[:4], payout=2.5)
    return {"campaign": campaign, "stream": stream, "main": main, "capped": capped, "today": today_start}


def counted(db, where: str, params: tuple) -> int:
    from models.store.rows import fetch_single

    return fetch_single(db.connection(), f"SELECT COUNT(*) FROM click WHERE {where}", params)[0]


def cells(html: str, selector: str) -> list[str]:
    """The cells of the row `selector` names (the stream's total, or an offer's by its id)."""
    row = re.search(rf"<tr {selector}>(.*?)</tr>", html, re.S)
    assert row, selector
    return [
        htmllib.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
        for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(1), re.S)
    ]


def whole(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_editor_shows_each_stream_s_and_offer_s_numbers_as_sql_counts_them(panel, users, served, db):
    campaign, main, capped = served["campaign"], served["main"], served["capped"]
    today, cid = served["today"], campaign.id
    admin = log_in(panel)
    status, _, html = get(panel, f"/panel/campaigns/{cid}?period=last_7_days", admin)
    assert status == 200, html
    stream = cells(html, 'class="stream-total"')
    # All of the stream | weight | served | clicks, conv., revenue today | the same for 7 days | caps.
    assert stream[0] == "All of the stream"
    assert whole(stream[3]) == counted(db, "campaign_id = ? AND created_at >= ?", (cid, today)) == 30
    assert whole(stream[4]) == 4 and stream[5] == "10.00 USD"
    assert whole(stream[6]) == counted(db, "campaign_id = ?", (cid,)) == 42
    assert whole(stream[7]) == 4 and stream[8] == "10.00 USD"
    assert stream[9:] == ["–", "–"]  # The stream itself has no cap.

    main_row = cells(html, f'class="offer-numbers" data-offer="{main.id}"')
    capped_row = cells(html, f'class="offer-numbers" data-offer="{capped.id}"')
    assert main_row[0] == "Main Offer" and main_row[1] == "3 · 75.0%"
    assert capped_row[0] == "Capped Offer" and capped_row[1] == "1 · 25.0%"
    for row, offer in ((main_row, main), (capped_row, capped)):
        assert whole(row[3]) == counted(db, "offer_id = ? AND created_at >= ?", (offer.id, today))
        assert whole(row[6]) == counted(db, "offer_id = ?", (offer.id,))
    # The capped offer served 5 today (its cap, so the rest went to Main) and its share is what it got.
    assert whole(capped_row[3]) == 5 and capped_row[9] == "5 / 5" and main_row[9:] == ["–", "–"]
    capped_all = counted(db, "offer_id = ?", (capped.id,))
    assert capped_row[10] == f"{capped_all} / 40"
    assert capped_row[2] == f"{capped_all / 42 * 100:.1f}%"
    assert re.search(r'<td class="n cap-today reached"[^>]*>5 / 5</td>', html)
    assert whole(main_row[4]) == 4 and main_row[5] == "10.00 USD" and whole(capped_row[4]) == 0


def test_today_alone_shows_no_period_columns_and_hide_money_no_revenue(panel, users, served, db):
    cid = served["campaign"].id
    html = get(panel, f"/panel/campaigns/{cid}", log_in(panel))[2]
    assert "Clicks last 7 days" not in html and "Revenue today" in html
    assert 'aria-current="true">Today</a>' in html
    stream = cells(html, 'class="stream-total"')
    assert whole(stream[3]) == 30 and len(stream) == 8
    own(db, cid, users["frugal"])
    html = get(panel, f"/panel/campaigns/{cid}?period=last_30_days", log_in(panel, "frugal"))[2]
    assert "Revenue" not in html and "USD" not in html
    stream = cells(html, 'class="stream-total"')
    assert [whole(stream[n]) for n in (3, 4, 5, 6)] == [30, 4, 42, 4]
    # A custom range: the day two days ago alone holds the first 12 clicks.
    import datetime

    day = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)).date()
    html = get(panel, f"/panel/campaigns/{cid}?period=custom&from={day}&to={day}", log_in(panel))[2]
    assert f"Clicks {day} to {day}" in html
    stream = cells(html, 'class="stream-total"')
    assert [whole(stream[n]) for n in (3, 6)] == [30, 12]
    # Another buyer's campaign is no campaign, numbers or not.
    assert get(panel, f"/panel/campaigns/{cid}?period=last_7_days", log_in(panel, "bert"))[0] == 404
    assert get(panel, f"/panel/campaigns/{cid}?period=forever", log_in(panel))[0] == 400
