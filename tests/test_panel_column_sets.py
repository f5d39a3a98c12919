"""Column sets over HTTP (in process): chosen, reordered and saved on the report builder and the campaign
list, restored at a new login, the grouping remembered, another user's set not there, bad input a 4xx;
and the summary row without ticked rows against numbers counted independently from the stored clicks."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import html as htmlib
import re
import urllib.parse

import pytest
from conftest import request
from test_panel import FORM, clicks, csrf_token, get, log_in, make_panel, own, panel, post, users  # noqa: F401

WEEK = "/panel/reports?period=last_7_days"


def ok(panel, path: str, cookie: str) -> str:
    status, _, html = get(panel, path, cookie)
    assert status == 200, html
    return html


def redirect(panel, path: str, cookie: str) -> str:
    status, headers, html = get(panel, path, cookie)
    assert status == 303, html
    return headers["location"]


def query(location: str) -> list[tuple[str, str]]:
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query, keep_blank_values=True)


def chooser_columns(html: str) -> list[str]:
    return re.findall(r'<li data-column="(\w+)">', html)


def report_headers(html: str) -> list[str]:
    head = re.search(r'<table class="report">.*?<thead>(.*?)</thead>', html, re.S).group(1)
    return [
        htmlib.unescape(re.sub(r"<[^>]+>", "", th)).strip()
        for th in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)
    ]


def save(panel, cookie: str, html: str, **fields) -> tuple[int, dict, str]:
    body = urllib.parse.urlencode({"csrf_token": csrf_token(html), **fields}, doseq=True).encode()
    status, headers, out = request(panel, "/panel/column-sets", {**FORM, "Cookie": cookie}, "POST", body)
    return status, headers, out.decode()


def test_a_set_is_chosen_reordered_saved_and_restored_at_a_new_login(panel, users, clicks):
    anna = log_in(panel)
    html = ok(panel, WEEK + "&col=clicks&col=profit&col=roi", anna)
    assert chooser_columns(html) == ["clicks", "profit", "roi"]
    # The chooser's buttons: a redirect to the columns they make (no script needed).
    moved = redirect(panel, WEEK + "&col=clicks&col=profit&col=roi&move=up:profit", anna)
    assert [v for n, v in query(moved) if n == "col"] == ["profit", "clicks", "roi"]
    added = redirect(panel, moved + "&add=epc&move=add", anna)
    assert [v for n, v in query(added) if n == "col"] == ["profit", "clicks", "roi", "epc"]
    dropped = redirect(panel, added + "&move=drop:roi", anna)
    assert [v for n, v in query(dropped) if n == "col"] == ["profit", "clicks", "epc"]
    html = ok(panel, dropped, anna)
    status, headers, body = save(
        panel,
        anna,
        html,
        page="reports",
        name="Buyer day",
        col=["profit", "clicks", "epc"],
        sort="-profit,clicks",
        groups="campaign,offer",
        default="1",
        back=dropped,
    )
    assert status == 303, body
    ref = dict(query(headers["location"]))["set"]
    applied = dict(query(redirect(panel, headers["location"], anna)))
    assert applied["g1"] == "campaign" and applied["g2"] == "offer"
    assert (applied["sort"], applied["order"], applied["sort2"], applied["order2"]) == (
        "profit",
        "desc",
        "clicks",
        "asc",
    )
    # A new login (another browser): the page opens with the default set, its sort and the set listed.
    again = log_in(panel)
    html = ok(panel, WEEK, again)
    assert report_headers(html) == ["Campaign", "Profit ▼", "Clicks ▲2", "EPC"]
    assert f'<option value="{ref}" selected>Buyer day — default</option>' in html
    # The last grouping is restored on a bare visit.
    ok(panel, WEEK + "&g1=offer&g2=country", again)
    assert report_headers(ok(panel, "/panel/reports", again))[0] == "Offer"
    # The campaign list: a preset picked, then saved as the default.
    location = redirect(panel, "/panel/campaigns?period=today&q=gen&set=preset:money", again)
    assert dict(query(location))["q"] == "gen" and dict(query(location))["sort"] == "-profit,-clicks"
    html = ok(panel, location, again)
    assert chooser_columns(html)[:3] == ["status", "clicks", "conversions"] and 'data-label="CPA"' in html
    status, headers, body = save(
        panel,
        again,
        html,
        page="campaigns",
        name="Money mine",
        col=chooser_columns(html),
        sort="-profit",
        default="1",
        back=location,
    )
    assert status == 303, body
    html = ok(panel, "/panel/campaigns", log_in(panel))
    assert chooser_columns(html) == [
        "status",
        "clicks",
        "conversions",
        "cr",
        "revenue",
        "cost",
        "profit",
        "roi",
        "epc",
        "cpc",
        "cpa",
    ]
    assert 'aria-sort="descending"><a href="?' in html and 'data-sort="profit">Profit' in html


def test_another_user_s_set_and_bad_input_are_a_clear_4xx(panel, users, clicks, db):
    anna = log_in(panel)
    html = ok(panel, WEEK, anna)
    status, headers, _ = save(
        panel, anna, html, page="reports", name="Anna's", col=["clicks", "revenue"], back=WEEK
    )
    ref = dict(query(headers["location"]))["set"]
    bert = log_in(panel, "bert")
    bert_html = ok(panel, "/panel/campaigns", bert)
    token = csrf_token(bert_html)
    assert get(panel, f"{WEEK}&set={ref}", bert)[0] == 404
    for action in ("default", "delete", "undefault"):
        status, _, body = post(
            panel,
            f"/panel/column-sets/{ref}",
            {"csrf_token": token, "page": "reports", "action": action},
            bert,
        )
        assert status == 404 and b"no column set" in body, action
    assert "col=revenue" in redirect(panel, f"{WEEK}&set={ref}", anna)  # Still anna's.
    cases = [
        ({"page": "reports", "name": "x", "col": "planet"}, 400, b"&#39;planet&#39; is no column here"),
        ({"page": "nowhere", "name": "x", "col": "clicks"}, 400, b"The page is one of"),
        ({"page": "reports", "name": "", "col": "clicks"}, 400, b"Give the set a name."),
        ({"page": "reports", "name": "x", "col": "clicks", "sort": "-cost"}, 400, b"Sort by up to 2"),
        (
            {"page": "campaigns", "name": "x", "col": "clicks", "groups": "offer"},
            303,
            b"",
        ),  # Ignored off the builder.
        ({"page": "reports", "name": "x", "col": "clicks", "action": "nope"}, 303, b""),
    ]
    for fields, code, message in cases:
        status, _, body = post(panel, "/panel/column-sets", {"csrf_token": token, **fields}, bert)
        assert status == code and message in body, (fields, body[:300])
    status, _, body = post(
        panel, "/panel/column-sets/1", {"csrf_token": token, "page": "reports", "action": "rename"}, bert
    )
    assert status in (400, 404) and b"500" not in body
    huge = urllib.parse.urlencode(
        {"csrf_token": token, "page": "reports", "name": "x", "col": "clicks," * 20_000}
    ).encode()
    status, _, _ = request(panel, "/panel/column-sets", {**FORM, "Cookie": bert}, "POST", huge)
    assert status == 413
    status, _, _ = request(
        panel,
        "/panel/column-sets",
        {"Content-Type": "application/json", "Cookie": bert},
        "POST",
        b'{"col": {"a": {"b": [1]}}}',
    )
    assert status == 415
    assert (
        post(panel, "/panel/column-sets", {"page": "reports", "name": "x", "col": "clicks"}, bert)[0] == 403
    )  # No token.
    assert get(panel, "/panel/column-sets/99999999999999999999999", bert)[0] in (404, 405)
    for path, code in (
        (f"{WEEK}&set=preset:nope", 404),
        (f"{WEEK}&set=1%20OR%201", 404),
        (f"{WEEK}&move=up:planet", 400),
        (f"{WEEK}&move=sideways:clicks", 400),
        (f"{WEEK}&add=planet", 400),
        (f"{WEEK}&sort2=planet", 400),
        (f"{WEEK}&sort=clicks&sort2=clicks", 400),
        ("/panel/campaigns?col=planet", 400),
        ("/panel/campaigns?set=12345", 404),
        ("/panel/campaigns?move=up:nothing", 400),
    ):
        assert get(panel, path, bert)[0] == code, path
    # Money: a user who hides it picks the money preset and sees none of it, and may not save it.
    frugal = log_in(panel, "frugal")
    own(db, 1, users["frugal"])
    html = ok(panel, redirect(panel, f"{WEEK}&set=preset:money", frugal), frugal)
    assert report_headers(html) == ["Campaign", "Clicks ▼", "Conv.", "CR"]  # Sorted by clicks: no profit.
    status, _, body = save(
        panel, frugal, html, page="campaigns", name="x", col=["clicks", "profit"], back="/panel/campaigns"
    )
    assert status == 400 and "&#39;profit&#39; is no column here" in body
    assert get(panel, "/panel/campaigns?col=clicks,roi", frugal)[0] == 400


def number(text: str) -> float | None:
    text = htmlib.unescape(re.sub(r"<[^>]+>", "", text)).strip()
    if text == "–":
        return None
    return float(text.split()[0].rstrip("%").replace(",", ""))


def less_row(html: str) -> dict[str, float | None]:
    row = re.search(r'<tr id="total-less" class="total">(.*?)</tr>', html, re.S) or re.search(
        r'<tr class="total less" id="total-less">(.*?)</tr>', html, re.S
    )
    assert row, "no total without the ticked rows"
    return {
        key: number(cell)
        for key, cell in re.findall(
            r'<td class="n"[^>]*data-column="(\w+)"[^>]*>(.*?)</td>', row.group(1), re.S
        )
    }


@pytest.fixture
def money_clicks(db, clicks):
    """Clicks over two campaigns: campaign 1 with 9 sales of 2.50 and 100.00 of cost, campaign 2 with 2."""
    from test_panel_logs import imported, stored_subids

    from models.reporting.costs import spread_cost

    imported(db, stored_subids(db, 1)[:9] + stored_subids(db, 2)[:2])
    spread_cost(db, 1, 0, 2**42, 100.0)


def test_the_total_without_ticked_rows_equals_an_independent_count(panel, users, money_clicks, db):
    from models.store.rows import fetch_single

    def clicks_of(campaign: int) -> int:
        return fetch_single(db.connection(), "SELECT COUNT(*) FROM click WHERE campaign_id = ?", (campaign,))[
            0
        ]

    sales = {1: (9, 22.5, 100.0), 2: (2, 5.0, 0.0)}  # conversions, revenue, cost
    cookie = log_in(panel)
    columns = ("clicks", "conversions", "cr", "revenue", "cost", "profit", "roi", "epc", "cpc", "cpa")
    report = WEEK + "".join(f"&col={c}" for c in columns)
    for ticked, kept in ((1, 2), (2, 1)):
        clicks = clicks_of(kept)
        conversions, revenue, cost = sales[kept]
        profit = revenue - cost
        expected = {
            "clicks": clicks,
            "conversions": conversions,
            "cr": round(conversions / clicks * 100, 1),
            "revenue": revenue,
            "cost": cost,
            "profit": profit,
            "roi": round(profit / cost * 100, 1) if cost else None,
            "epc": round(revenue / clicks, 2),
            "cpc": round(cost / clicks, 2),
            "cpa": round(cost / conversions, 2),
        }
        assert less_row(ok(panel, f"{report}&without={ticked}", cookie)) == expected
        shown = ok(
            panel, f"/panel/campaigns?period=last_7_days&col={','.join(columns)}&without={ticked}", cookie
        )
        assert less_row(shown) == expected
        assert f'value="{ticked}" form="subtract-form" class="subtract-row"' in shown
    # Nothing ticked: no second row; everything ticked: zeros and no ratios.
    assert 'id="total-less"' not in ok(panel, report, cookie)
    both = less_row(ok(panel, f"{report}&without=1&without=2", cookie))
    assert both["clicks"] == 0 and both["cr"] is None and both["epc"] is None


def test_every_list_shows_its_chosen_columns_in_order_on_the_page_and_in_its_csv(panel, users, clicks):
    anna = log_in(panel)
    frugal = log_in(panel, "frugal")
    for path, preset, first in (
        ("/panel/offers", "money", "name"),
        ("/panel/sources", "money", "name"),
        ("/panel/networks", "macros", "name"),
        ("/panel/landers", "usage", "name"),
    ):
        location = redirect(panel, f"{path}?status=all&set=preset:{preset}", anna)
        columns = dict(query(location))["col"].split(",")
        html = ok(panel, location, anna)
        assert re.findall(r'data-sort="(\w+)"', html) == [first, *columns], path
        assert chooser_columns(html) == columns
        # The filter form and the CSV link keep the columns; the CSV has them, in order.
        assert f'name="col" value="{",".join(columns)}"' in html
        csv_link = htmlib.unescape(re.search(r'href="([^"]+\.csv\?[^"]*)"', html).group(1))
        status, _, body = request(panel, csv_link, {"Cookie": anna})
        header = body.decode().splitlines()[0]
        labels = [htmlib.unescape(t).strip() for t in re.findall(r'data-sort="\w+">([^<]+)', html)]
        assert status == 200 and [h for h in header.split(",") if h in labels] == labels, (path, header)
        # Reordered with a button, and a column the list lacks is a 400.
        moved = redirect(panel, f"{location}&move=down:{columns[0]}", anna)
        assert dict(query(moved))["col"].split(",")[:2] == [columns[1], columns[0]]
        assert get(panel, f"{path}?col=planet", anna)[0] == 400
        # A user who hides money: a money preset's amounts are not there.
        html = ok(panel, redirect(panel, f"{path}?set=preset:{preset}", frugal), frugal)
        assert not {"revenue", "payout", "cost", "profit", "roi", "epc", "cpc"} & set(
            re.findall(r'data-sort="(\w+)"', html)
        )


def test_the_api_keeps_a_user_s_sets_as_the_panel_does(panel, users, db):
    import json

    from models.accounts.apikeys import create_api_key

    _, anna = create_api_key(db, "anna", "write")
    _, bert = create_api_key(db, "bert", "write")

    def call(method: str, path: str, key: str, body=None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-Api-Key": key, "Content-Type": "application/json"}
        status, _, out = request(panel, "/api/v1/column-sets" + path, headers, method, data)
        return status, json.loads(out)

    status, saved = call(
        "POST",
        "",
        anna,
        {
            "page": "campaigns",
            "name": "API",
            "columns": ["clicks", "roi"],
            "sort": "-roi",
            "is_default": True,
        },
    )
    assert status == 201 and saved["columns"] == ["clicks", "roi"] and saved["is_default"]
    # The panel opens the campaign list with it: the set is the same store.
    assert re.findall(r'<li data-column="(\w+)">', ok(panel, "/panel/campaigns", log_in(panel))) == [
        "clicks",
        "roi",
    ]
    status, listed = call("GET", "?page=campaigns", anna)
    assert [item["name"] for item in listed["items"]] == ["Traffic", "Money", "Landers", "API"]
    assert call("GET", "", bert)[1] == {"items": []}
    for method, body in (("GET", None), ("PATCH", {"is_default": False}), ("DELETE", None)):
        assert call(method, f"/{saved['id']}", bert, body)[0] == 404, method
    assert call("PATCH", f"/{saved['id']}", anna, {"is_default": False})[1]["is_default"] is False
    for body, message in (
        ({"page": "campaigns", "name": "x", "columns": ["planet"]}, "'planet' is no column here"),
        ({"page": "moon", "name": "x", "columns": ["clicks"]}, "The page is one of"),
        (
            {"page": "campaigns", "name": "x", "columns": {"a": {"b": ["clicks"]}}},
            "must be a list of strings",
        ),
        ({"page": "campaigns", "name": "x", "columns": ["clicks"], "extra": 1}, "Unknown field"),
    ):
        status, answer = call("POST", "", anna, body)
        assert status == 400 and message in answer["description"], answer
    assert call("DELETE", f"/{saved['id']}", anna)[0] == 200
    assert call("GET", f"/{saved['id']}", anna)[0] == 404


def test_the_logs_show_their_chosen_columns_and_keep_them_in_their_filter(panel, users, clicks):
    anna, frugal = log_in(panel), log_in(panel, "frugal")
    for path, preset in (("/panel/clicks", "visitor"), ("/panel/conversions", "money")):
        location = redirect(panel, f"{path}?period=last_7_days&set=preset:{preset}", anna)
        columns = dict(query(location))["col"].split(",")
        html = ok(panel, location, anna)
        assert re.findall(r'<th[^>]*data-column="(\w+)"', html) == columns, path
        assert f'<input type="hidden" name="col" value="{",".join(columns)}">' in html
        hidden = ok(panel, redirect(panel, f"{path}?set=preset:{preset}", frugal), frugal)
        assert not {"payout", "report_payout", "cost"} & set(
            re.findall(r'<th[^>]*data-column="(\w+)"', hidden)
        )
    assert get(panel, "/panel/clicks?col=payout", anna)[0] == 400
