"""The panel's rules page (/panel/rules, /panel/rules/{id}) and alert channels page (/panel/alerts) in
process: a rule made by its form, its dry run with the numbers, edit, pause / resume, the log and undo;
a channel added with its secret masked, a test through a local fake of Telegram, pause; admins only, CSRF,
refusals in one sentence and escaping."""

from __future__ import annotations

import pytest
from alert_fakes import BOT_TOKEN, CHAT_ID, AlertFake
from test_alerts import zones  # noqa: F401
from test_panel import csrf_token, get, log_in, make_panel, users  # noqa: F401
from test_panel import post as post_bytes
from test_rules import CLICKED_AT, land, push_campaign  # noqa: F401

from models.tables.optimisation import RuleAction

# ruff: noqa: F811 (the fixtures imported above, taken as arguments)

RULE = {
    "name": "cut <zones>",
    "campaigns": "push",
    "dimension": "zoneid",
    "window": "90d",
    "conditions": "cost >= 5 and conversions = 0",
    "action": "blacklist",
    "max_actions": "1",
    "timezone": "UTC",
    "notify": "",
}


def post(app, path, fields, cookie=None):
    status, headers, body = post_bytes(app, path, fields, cookie=cookie)
    return status, headers, body.decode()


@pytest.fixture
def fake():
    server = AlertFake()
    yield server
    server.close()


def test_an_admin_makes_a_rule_sees_its_dry_run_edits_pauses_and_undoes_what_it_did(
    make_panel, users, db, zones, fake
):
    from models.optimisation.rules import run_rules

    panel = make_panel(LANNER_TELEGRAM_API_URL=fake.base)
    cookie = log_in(panel)
    assert 'href="/panel/rules"' in get(panel, "/panel/reports", cookie)[2]
    listing = get(panel, "/panel/rules", cookie)[2]
    assert "No rules yet." in listing
    token = csrf_token(listing)
    status, _, body = post(
        panel, "/panel/rules", RULE | {"conditions": "roi < -150", "csrf_token": token}, cookie=cookie
    )
    assert status == 400 and "roi is never below -100" in body and 'value="cut &lt;zones&gt;"' in body
    status, headers, _ = post(panel, "/panel/rules", RULE | {"csrf_token": token}, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/rules/1?done=created"
    page = get(panel, headers["location"], cookie)[2]
    assert "Rule cut &lt;zones&gt;" in page and "<zones>" not in page
    dry = page.split('id="dry-run"')[1].split("</table>")[0]
    assert "<td>10</td><td>blacklist</td>" in dry and "10.00" in dry and "-100.0%" in dry
    assert "1 held back by its limit" in page
    assert RuleAction.select().count() == 0  # A dry run changes nothing.

    status, headers, _ = post(
        panel, "/panel/rules/1", RULE | {"do": "save", "max_actions": "5", "csrf_token": token}, cookie=cookie
    )
    assert status == 303 and headers["location"].endswith("done=saved")
    assert "at most 5 a run" in get(panel, "/panel/rules/1", cookie)[2]
    status, _, body = post(
        panel, "/panel/rules/1", RULE | {"do": "save", "window": "1y", "csrf_token": token}, cookie=cookie
    )
    assert status == 400 and "A window is hours or days" in body

    run_rules(db, now=CLICKED_AT + 3600)
    listed = get(panel, "/panel/rules", cookie)[2]
    assert '<td class="num">2</td>' in listed and "never" not in listed.split('id="rule-list"')[1]
    page = get(panel, "/panel/rules/1", cookie)[2]
    (first,) = [a.id for a in RuleAction.select().where(RuleAction.target == "10")]
    status, headers, _ = post(
        panel, "/panel/rules/1", {"do": "undo", "action_id": first, "csrf_token": token}, cookie=cookie
    )
    assert status == 303 and headers["location"].endswith("done=undone")
    assert "undone" in get(panel, "/panel/rules/1", cookie)[2].split('id="rule-log"')[1]
    assert (
        post(panel, "/panel/rules/1", {"do": "undo", "action_id": "999", "csrf_token": token}, cookie=cookie)[
            0
        ]
        == 404
    )
    status, headers, _ = post(panel, "/panel/rules/1", {"do": "pause", "csrf_token": token}, cookie=cookie)
    assert status == 303 and "paused" in get(panel, "/panel/rules", cookie)[2]
    assert post(panel, "/panel/rules/1", {"do": "pause"}, cookie=cookie)[0] == 403  # No CSRF token.
    assert get(panel, "/panel/rules/99", cookie)[0] == 404
    for name in ("bert", "vera"):
        other = log_in(panel, name)
        assert get(panel, "/panel/rules", other)[0] == 403
        assert get(panel, "/panel/rules/1", other)[0] == 403
        assert get(panel, "/panel/alerts", other)[0] == 403

    # Alert channels: added masked, tested through the fake, paused; then a rule notifies it.
    page = get(panel, "/panel/alerts", cookie)[2]
    assert "No channels yet." in page
    added = {"do": "add", "name": "buyers", "kind": "telegram", "bot_token": BOT_TOKEN, "chat_id": CHAT_ID}
    status, _, body = post(
        panel, "/panel/alerts", added | {"chat_id": "x y", "csrf_token": token}, cookie=cookie
    )
    assert status == 400 and "chat id is a number" in body and BOT_TOKEN not in body
    status, headers, _ = post(panel, "/panel/alerts", added | {"csrf_token": token}, cookie=cookie)
    assert status == 303
    flash = headers["set-cookie"].split(";")[0]
    page = get(panel, "/panel/alerts", f"{cookie}; {flash}")[2]
    assert "Channel buyers added." in page and BOT_TOKEN not in page and "****" + BOT_TOKEN[-4:] in page
    status, headers, _ = post(
        panel, "/panel/alerts", {"do": "test", "channel": "1", "csrf_token": token}, cookie=cookie
    )
    flash = headers["set-cookie"].split(";")[0]
    assert "accepted the test alert" in get(panel, "/panel/alerts", f"{cookie}; {flash}")[2]
    assert len(fake.messages("telegram")) == 1
    status, headers, _ = post(
        panel, "/panel/alerts", {"do": "pause", "channel": "1", "csrf_token": token}, cookie=cookie
    )
    assert status == 303 and "Paused" in get(panel, headers["location"], cookie)[2]
    status, _, body = post(
        panel,
        "/panel/alerts",
        {"do": "add", "name": "wh", "kind": "webhook", "url": "https://x.example/h", "csrf_token": token},
        cookie=cookie,
    )
    assert status == 200 and "signing secret, shown this once" in body  # Never put in a cookie.
    post(
        panel, "/panel/rules/1", RULE | {"do": "save", "notify": "buyers", "csrf_token": token}, cookie=cookie
    )
    assert "telling <a" in get(panel, "/panel/rules/1", cookie)[2]
