"""The panel's offers pages (/panel/offers) in process: the list with the period's numbers, who sees
which offers, create and edit with the form's errors, roles, CSRF, hidden money and escaping."""

from __future__ import annotations

import re

from test_panel import clicks, csrf_token, get, log_in, make_panel, own, panel, post, users  # noqa: F401

NEW = {
    "name": "Shop",
    "url": "https://shop.example/?c={subid}",
    "payout": "4.5",
    "currency": "",
    "daily_cap": "",
    "total_cap": "",
    "timezone": "UTC",
}


def offer_row(html: str, name: str) -> str:
    return re.search(rf"<tr>\s*<td class=\"name\"><a [^>]*>{re.escape(name)}</a>.*?</tr>", html, re.S).group(
        0
    )


def test_the_list_shows_each_offer_s_period_numbers(panel, users, clicks):  # noqa: F811
    html = get(panel, "/panel/offers?period=last_7_days", log_in(panel))[2]
    rows = [offer_row(html, f"Generated offer {n}") for n in (0, 1)]
    counts = [int(re.findall(r'<td class="n">([\d,]+)</td>', row)[0].replace(",", "")) for row in rows]
    assert sum(counts) == 250 and all(counts)
    assert "EPC" in html and "https://offer0.example/?click={subid}" in html
    html = get(panel, "/panel/offers?period=last_7_days&q=OFFER1.example", log_in(panel))[2]
    assert "Generated offer 1" in html and "Generated offer 0" not in html


def test_a_buyer_sees_the_offers_of_their_campaigns_and_unused_ones(panel, users, clicks, db):  # noqa: F811
    from models.admin.services import create_offer

    create_offer(db, "Unused", "https://unused.example/")
    own(db, 2, users["bert"])
    html = get(panel, "/panel/offers", log_in(panel, "bert"))[2]
    assert "Generated offer 1" in html and "Unused" in html and "Generated offer 0" not in html
    cookie = log_in(panel, "bert")
    assert get(panel, "/panel/offers/1", cookie)[0] == 404  # Campaign 1's offer.
    assert get(panel, "/panel/offers/2", cookie)[0] == 200
    assert get(panel, "/panel/offers/99", cookie)[0] == 404


def test_creating_an_offer_and_a_refused_form_keeps_what_was_typed(panel, users, db):  # noqa: F811
    from models.accounts.audit import list_audit
    from models.admin.services import get_offer

    cookie = log_in(panel, "bert")
    token = csrf_token(get(panel, "/panel/offers", cookie)[2])
    status, headers, _ = post(panel, "/panel/offers", {**NEW, "csrf_token": token}, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/offers/1?created=1"
    offer = get_offer(1)
    assert (offer.name, offer.payout, offer.currency, offer.daily_cap) == ("Shop", 4.5, "USD", None)
    assert list_audit(db, entity="offer")[0].actor == "bert"
    for field, value, sentence in (
        ("url", "ftp://x.example/{nope}", "http"),
        ("payout", "lots", "The payout must be a number."),
        ("daily_cap", "-3", "The daily cap must be a whole number"),
        ("currency", "U$D", "is not a three-letter code"),
        ("name", "", "An offer needs a name."),
    ):
        status, _, body = post(
            panel, "/panel/offers", {**NEW, field: value, "csrf_token": token}, cookie=cookie
        )
        html = body.decode()
        assert status == 400 and 'role="alert"' in html and sentence in html, (field, html[-2000:])
        assert '<details class="card new-offer" open>' in html and 'value="https://' in html or field == "url"
    from models.admin.services import list_offers

    assert [o.id for o in list_offers(db)] == [1]


def test_editing_an_offer_changes_every_field_and_clears_one_cap(panel, users, db):  # noqa: F811
    from models.admin.services import create_offer, get_offer

    create_offer(db, "Old", "https://old.example/", payout=1, daily_cap=10, total_cap=100)
    cookie = log_in(panel)
    html = get(panel, "/panel/offers/1", cookie)[2]
    assert 'value="Old"' in html and 'name="daily_cap" value="10"' in html
    fields = {
        "name": "New",
        "url": "https://new.example/?s={subid}",
        "payout": "2.25",
        "currency": "eur",
        "daily_cap": "",
        "total_cap": "500",
        "timezone": "Europe/Berlin",
        "status": "paused",
    }
    status, headers, _ = post(
        panel, "/panel/offers/1", {**fields, "csrf_token": csrf_token(html)}, cookie=cookie
    )
    assert status == 303 and headers["location"] == "/panel/offers/1?saved=1"
    offer = get_offer(1)
    assert (offer.name, offer.url, offer.payout, offer.currency) == ("New", fields["url"], 2.25, "EUR")
    assert (offer.daily_cap, offer.total_cap, offer.timezone, offer.status) == (
        None,
        500,
        "Europe/Berlin",
        "paused",
    )
    assert "Saved." in get(panel, headers["location"], cookie)[2]
    status, _, body = post(
        panel,
        "/panel/offers/1",
        {**fields, "timezone": "Mars/Base", "csrf_token": csrf_token(html)},
        cookie=cookie,
    )
    assert status == 400 and b"Unknown timezone" in body and get_offer(1).timezone == "Europe/Berlin"


def test_viewers_may_not_write_and_forms_need_the_token(panel, users, db):  # noqa: F811
    from models.admin.services import create_offer, get_offer

    create_offer(db, "Old", "https://old.example/")
    viewer = log_in(panel, "vera")
    html = get(panel, "/panel/offers/1", viewer)[2]
    assert '<fieldset class="offer-fields" disabled>' in html and "save-offer" not in html
    assert "New offer" not in get(panel, "/panel/offers", viewer)[2]
    fields = {**NEW, "csrf_token": csrf_token(html)}
    assert post(panel, "/panel/offers", fields, cookie=viewer)[0] == 403
    assert post(panel, "/panel/offers/1", fields, cookie=viewer)[0] == 403
    admin = log_in(panel)
    assert post(panel, "/panel/offers/1", {**NEW, "csrf_token": "x" * 43}, cookie=admin)[0] == 403
    token = csrf_token(get(panel, "/panel/offers", admin)[2])
    status, _, _ = post(
        panel,
        "/panel/offers/1",
        {**NEW, "csrf_token": token},
        cookie=admin,
        headers={"Origin": "https://evil.example"},
    )
    assert status == 403 and get_offer(1).name == "Old"


def test_a_user_who_hides_money_sees_no_payout_and_keeps_it_when_saving(panel, users, clicks, db):  # noqa: F811
    from models.admin.services import get_offer, update_offer

    update_offer(db, 1, payout=7.5)
    own(db, 1, users["frugal"])
    cookie = log_in(panel, "frugal")
    for path in ("/panel/offers?period=last_7_days", "/panel/offers/1"):
        html = get(panel, path, cookie)[2]
        assert "Generated offer 0" in html
        assert "Payout" not in html and "Revenue" not in html and "EPC" not in html and "7.5" not in html
    fields = {**NEW, "payout": "0", "csrf_token": csrf_token(html)}
    assert post(panel, "/panel/offers/1", fields, cookie=cookie)[0] == 303
    assert get_offer(1).payout == 7.5 and get_offer(1).name == "Shop"


def test_offer_names_and_urls_come_out_escaped(panel, users, db):  # noqa: F811
    from models.admin.services import create_offer

    create_offer(db, '<script>alert("x")</script>', 'https://x.example/?a="><img src=x onerror=alert(1)>')
    cookie = log_in(panel)
    for path in ("/panel/offers", "/panel/offers/1", "/panel/offers?q=%3Cscript%3E"):
        html = get(panel, path, cookie)[2]
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
