"""The panel's postback set-up (/panel/postbacks) in process: the URL to paste into a network (its key
for admins only), outbound targets (add, remove, send a test to a local server), status maps (admins),
roles, CSRF and escaping."""

from __future__ import annotations

import html as html_module
import re
import urllib.parse

from conftest import request
from test_outbound import TargetServer
from test_panel import FORM, clicks, csrf_token, get, log_in, make_panel, own, panel, post, users  # noqa: F401


def post_lists(app, cookie, fields: list[tuple[str, str]], headers=None):
    sent = {**FORM, "Cookie": cookie, **(headers or {})}
    return request(app, "/panel/postbacks", sent, "POST", urllib.parse.urlencode(fields).encode())


def test_an_admin_sees_the_postback_url_with_the_key_and_others_a_placeholder(panel, users, db):  # noqa: F811
    from models.conversions.postbacks import read_secret

    key = read_secret(db, "postback_key")
    assert key
    html = get(panel, "/panel/postbacks", log_in(panel))[2]
    url = f"http://127.0.0.1/{key}/postback?subid={{subid}}&amp;status={{status}}&amp;payout={{payout}}&amp;tid={{tid}}"
    assert f'value="{url}"' in html and 'class="copy"' in html and "transaction_id" in html
    assert f"/px/conversion?key={key}&amp;status=lead" in html
    for name in ("bert", "vera"):
        html = get(panel, "/panel/postbacks", log_in(panel, name))[2]
        assert key not in html and "http://127.0.0.1/POSTBACK-KEY/postback?subid={subid}" in html


def test_a_buyer_adds_tests_and_removes_a_target_of_their_campaign(panel, users, clicks, db):  # noqa: F811
    from models.conversions.admin import list_targets

    own(db, 1, users["bert"])
    server = TargetServer()
    try:
        cookie = log_in(panel, "bert")
        html = get(panel, "/panel/postbacks", cookie)[2]
        assert '<option value="1"' in html and '<option value="2"' not in html
        token = csrf_token(html)
        url = server.base + "/cb?click={sub_id_1}&sum={payout}&st={status}"
        fields = [
            ("csrf_token", token),
            ("do", "add"),
            ("campaign", "1"),
            ("url", url),
            ("statuses", "sale"),
            ("statuses", "lead"),
            ("method", "GET"),
        ]
        status, headers, _ = post_lists(panel, cookie, fields)
        assert status == 303 and headers["location"] == "/panel/postbacks?done=added"
        (target,) = list_targets(db)
        assert (target["campaign_id"], target["statuses"], target["url"]) == (1, "sale,lead", url)
        html = get(panel, headers["location"], cookie)[2]
        assert "Target added." in html and html_module.escape(url, quote=False) in html
        # A test of the saved target, then of a URL typed in the form: sample values, nothing stored.
        # Each test answers 303; the page it goes back to shows the result once, so a reload sends nothing.
        status, headers, _ = post(
            panel,
            "/panel/postbacks",
            {"csrf_token": token, "do": "test_target", "target": target["id"]},
            cookie=cookie,
        )
        assert status == 303 and headers["location"] == "/panel/postbacks"
        flash = headers["set-cookie"].split(";")[0]
        html = get(panel, "/panel/postbacks", f"{cookie}; {flash}")[2]
        assert "Test sent" in html and "(target 1)" in html and "200" in html
        assert "Test sent" not in get(panel, "/panel/postbacks", cookie)[2]
        fields[1] = ("do", "test")
        fields[3] = ("url", server.base + "/typed?x={subid}")
        status, headers, _ = post_lists(panel, cookie, fields)
        assert status == 303
        html = get(panel, "/panel/postbacks", f"{cookie}; {headers['set-cookie'].split(';')[0]}")[2]
        assert "Test sent" in html and html_module.escape(server.base + "/typed?x={subid}") in html
        paths = [seen.path for seen in server.wait_for(2)]
        assert paths[0] == "/cb?click=test&sum=1&st=sale" and paths[1].startswith("/typed?x=")
        assert len(list_targets(db)) == 1
        fields = {"csrf_token": token, "do": "remove", "target": target["id"]}
        status, headers, _ = post(panel, "/panel/postbacks", fields, cookie=cookie)
        assert status == 303 and list_targets(db) == []
    finally:
        server.close()


def test_a_bad_target_is_refused_next_to_the_form_with_what_was_typed(panel, users, clicks):  # noqa: F811
    cookie = log_in(panel)
    token = csrf_token(get(panel, "/panel/postbacks", cookie)[2])
    fields = [
        ("csrf_token", token),
        ("do", "add"),
        ("campaign", "1"),
        ("url", "https://s.example/?a={nope}"),
        ("method", "GET"),
    ]
    status, _, body = post_lists(panel, cookie, [*fields, ("statuses", "sale")])
    html = body.decode()
    assert (
        status == 400
        and 'role="alert"' in html
        and "nope" in html
        and 'value="https://s.example/?a={nope}"' in html
    )
    fields[3] = ("url", "https://s.example/?a={subid}")
    status, _, body = post_lists(panel, cookie, fields)
    assert status == 400 and b"Name at least one status" in body


def test_targets_follow_the_campaign_rules(panel, users, clicks, db):  # noqa: F811
    from models.accounts.sharing import share_campaign
    from models.conversions.admin import add_target, list_targets

    first = add_target(db, "gen-0", "https://s.example/?c={subid}", ["sale"])
    second = add_target(db, "gen-1", "https://other.example/?c={subid}", ["sale"])
    share_campaign(db, 1, "bert")  # Read-only: bert sees gen-0's target but may not touch it.
    cookie = log_in(panel, "bert")
    html = get(panel, "/panel/postbacks", cookie)[2]
    assert "s.example" in html and "other.example" not in html and "Send a test" not in html
    assert "Add a target" not in html  # No campaign of his to add one to.
    token = csrf_token(html)
    assert (
        post(
            panel,
            "/panel/postbacks",
            {"csrf_token": token, "do": "remove", "target": first.id},
            cookie=cookie,
        )[0]
        == 403
    )
    assert (
        post(
            panel,
            "/panel/postbacks",
            {"csrf_token": token, "do": "remove", "target": second.id},
            cookie=cookie,
        )[0]
        == 404
    )
    fields = [
        ("csrf_token", token),
        ("do", "add"),
        ("campaign", "gen-1"),
        ("url", "https://x.example/"),
        ("statuses", "sale"),
    ]
    assert post_lists(panel, cookie, fields)[0] == 404
    viewer = log_in(panel, "vera")
    share_campaign(db, 1, "vera")
    fields = {
        "csrf_token": csrf_token(get(panel, "/panel/postbacks", viewer)[2]),
        "do": "test_target",
        "target": first.id,
    }
    assert post(panel, "/panel/postbacks", fields, cookie=viewer)[0] == 403
    admin = log_in(panel)
    fields = {"do": "remove", "target": first.id}
    assert post(panel, "/panel/postbacks", {**fields, "csrf_token": "x" * 43}, cookie=admin)[0] == 403
    assert len(list_targets(db)) == 2


def test_only_an_admin_maps_and_unmaps_statuses_everyone_sees_them(panel, users, db):  # noqa: F811
    from models.conversions.admin import list_status_maps

    admin = log_in(panel)
    token = csrf_token(get(panel, "/panel/postbacks", admin)[2])
    fields = {"csrf_token": token, "do": "map", "word": "Approved_2", "status": "sale", "network": "Net"}
    status, headers, _ = post(panel, "/panel/postbacks", fields, cookie=admin)
    assert status == 303 and list_status_maps(db) == [
        {"network": "net", "raw_status": "approved_2", "status": "sale"}
    ]
    status, _, body = post(panel, "/panel/postbacks", {**fields, "status": "paid"}, cookie=admin)
    assert status == 400 and b"Status must be one of" in body
    buyer = log_in(panel, "bert")
    html = get(panel, "/panel/postbacks", buyer)[2]
    assert "approved_2" in html and 'value="unmap"' not in html and 'value="map"' not in html
    fields["csrf_token"] = csrf_token(html)
    assert post(panel, "/panel/postbacks", {**fields, "do": "unmap"}, cookie=buyer)[0] == 403
    assert post(panel, "/panel/postbacks", fields, cookie=buyer)[0] == 403
    fields["csrf_token"] = token
    status, headers, _ = post(panel, "/panel/postbacks", {**fields, "do": "unmap"}, cookie=admin)
    assert status == 303 and list_status_maps(db) == []
    status, _, body = post(panel, "/panel/postbacks", {**fields, "do": "unmap"}, cookie=admin)
    assert status == 400 and b"There is no map" in body


def test_target_urls_and_status_words_come_out_escaped(panel, users, clicks, db):  # noqa: F811
    from models.admin.services import update_campaign
    from models.conversions.admin import add_target, map_status

    update_campaign(db, 1, name="<script>alert(1)</script>")
    add_target(db, "gen-0", 'https://s.example/?a="><img src=x onerror=alert(1)>&c={subid}', ["sale"])
    map_status(db, '"><img src=x onerror=alert(2)>', "sale")
    html = get(panel, "/panel/postbacks", log_in(panel))[2]
    assert "<img src=x" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert re.search(r'name="word" value="&#34;&gt;&lt;img src=x onerror=alert\(2\)&gt;"', html)


def test_a_target_added_and_removed_in_the_panel_is_in_the_audit_log_under_its_user(panel, users, clicks, db):  # noqa: F811
    from models.accounts.audit import list_audit

    own(db, 1, users["bert"])
    cookie = log_in(panel, "bert")
    token = csrf_token(get(panel, "/panel/postbacks", cookie)[2])
    fields = [
        ("csrf_token", token),
        ("do", "add"),
        ("campaign", "1"),
        ("url", "https://s.example/?c={subid}"),
        ("statuses", "sale"),
        ("method", "GET"),
    ]
    assert post_lists(panel, cookie, fields)[0] == 303
    (entry,) = list_audit(db, entity="postback_target")
    assert (entry.actor, entry.action, entry.new_values["url"]) == (
        "bert",
        "create",
        "https://s.example/?c={subid}",
    )
    assert (
        post(
            panel,
            "/panel/postbacks",
            {"csrf_token": token, "do": "remove", "target": entry.entity_id},
            cookie=cookie,
        )[0]
        == 303
    )
    assert [(e.actor, e.action) for e in list_audit(db, entity="postback_target")] == [
        ("bert", "remove"),
        ("bert", "create"),
    ]
