"""The exchange rates page (/panel/rates) in process: everyone reads the latest rates and their history,
an admin sets a rate by hand for a day or has the (fake ECB) feed read now; the offer and campaign pages
warn of a currency without a rate."""

from __future__ import annotations

import re

import pytest
from test_panel import csrf_token, get, log_in, make_panel, post, users  # noqa: F401
from test_rates import DAY_1, DAY_2, ecb, ecb_xml  # noqa: F401

from models.reporting.currency import list_rates


def cells(html: str, table_id: str) -> list[list[str]]:
    """The text of each body row's cells of the table with that id."""
    body = re.search(rf'id="{table_id}">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in rows
    ]


def test_an_admin_sets_a_rate_by_hand_and_fetches_the_feed_which_keeps_it(make_panel, users, db, ecb):  # noqa: F811
    panel = make_panel(LANNER_EXCHANGE_RATE_URL=ecb.url)
    admin = log_in(panel)
    html = get(panel, "/panel/rates", admin)[2]
    assert 'id="rate-form"' in html and 'id="fetch-rates"' in html and "No rate yet" in html
    token = csrf_token(html)
    fields = {"csrf_token": token, "do": "set", "currency": "gbp", "rate": "1.3", "day": DAY_2.isoformat()}
    status, _, body = post(panel, "/panel/rates", fields, cookie=admin)
    assert status == 200 and f"1 GBP = 1.3 USD from {DAY_2.isoformat()}." in body.decode()
    status, _, body = post(panel, "/panel/rates", {**fields, "rate": "-2", "currency": "EUR"}, cookie=admin)
    assert status == 400 and "Rate &#39;-2&#39; must be a positive number" in body.decode()
    assert 'value="-2"' in body.decode() and 'value="EUR"' in body.decode()  # What was typed stays.
    status, _, body = post(panel, "/panel/rates", {**fields, "day": "soon"}, cookie=admin)
    assert status == 400 and "Day &#39;soon&#39; is not a date" in body.decode()
    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}, DAY_2: {"USD": 1.1, "GBP": 0.88}})
    status, _, body = post(panel, "/panel/rates", {"csrf_token": token, "do": "fetch"}, cookie=admin)
    html = body.decode()
    assert status == 200, html
    assert (
        f"Rates for {DAY_1.isoformat()} to {DAY_2.isoformat()}: 3 new or changed, 1 kept as set by hand"
        in html
    )
    assert cells(html, "latest-rates") == [
        ["EUR", "1.1", DAY_2.isoformat(), "127.0.0.1"],
        ["GBP", "1.3", DAY_2.isoformat(), "panel (by hand)"],
    ]
    assert cells(html, "rate-history")[:2] == [
        [DAY_2.isoformat(), "GBP", "1.3", "panel (by hand)"],
        [DAY_2.isoformat(), "EUR", "1.1", "127.0.0.1"],
    ]
    ecb.status = 500
    status, _, body = post(panel, "/panel/rates", {"csrf_token": token, "do": "fetch"}, cookie=admin)
    assert status == 502 and "could not be read: HTTP Error 500" in body.decode()
    assert len(list_rates(db, history=True)) == 4  # The stored rates stay.
    assert post(panel, "/panel/rates", {**fields, "csrf_token": "x" * 43}, cookie=admin)[0] == 403


def test_buyers_and_viewers_see_the_rates_read_only(make_panel, users, db, ecb):  # noqa: F811
    from models.reporting.currency import set_rates

    set_rates(db, {"EUR": 1.08}, day=DAY_1)
    panel = make_panel(LANNER_EXCHANGE_RATE_URL=ecb.url)
    for name in ("bert", "vera"):
        cookie = log_in(panel, name)
        status, _, html = get(panel, "/panel/rates", cookie)
        assert status == 200 and cells(html, "latest-rates") == [
            ["EUR", "1.08", DAY_1.isoformat(), "manual (by hand)"]
        ]
        assert 'id="rate-form"' not in html and 'id="fetch-rates"' not in html
        token = re.search(
            r'name="csrf_token" value="([^"]+)"', get(panel, "/panel/account", cookie)[2]
        ).group(1)
        for fields in ({"do": "set", "currency": "EUR", "rate": "9"}, {"do": "fetch"}):
            assert post(panel, "/panel/rates", {"csrf_token": token, **fields}, cookie=cookie)[0] == 403
    assert [row["rate"] for row in list_rates(db)] == [1.08] and ecb.hits == 0


def test_the_offer_and_campaign_pages_warn_of_a_currency_without_a_rate(panel_with_data, db):
    panel, admin = panel_with_data
    from models.admin.services import create_campaign, create_offer, update_campaign
    from models.reporting.currency import set_rates

    offer = create_offer(db, "Swiss", "https://o.example/?s={subid}", currency="CHF")
    campaign = create_campaign(db, "Alps", "alps", offer_id=offer.id)
    update_campaign(db, campaign.id, cost_model="cpc", cost_value=0.2, cost_currency="SEK")
    html = get(panel, f"/panel/offers/{offer.id}", admin)[2]
    assert "CHF has no exchange rate into the report currency USD" in html and 'href="/panel/rates"' in html
    html = get(panel, f"/panel/campaigns/{campaign.id}", admin)[2]
    assert "SEK has no exchange rate into the report currency USD" in html
    set_rates(db, {"CHF": 1.12, "SEK": 0.095})
    assert "has no exchange rate" not in get(panel, f"/panel/offers/{offer.id}", admin)[2]
    assert "has no exchange rate" not in get(panel, f"/panel/campaigns/{campaign.id}", admin)[2]


@pytest.fixture
def panel_with_data(make_panel, users):  # noqa: F811
    panel = make_panel()
    return panel, log_in(panel)
