"""Bulk archive and clone on the panel's campaign list (POST /panel/campaigns/bulk) in process."""

from __future__ import annotations

import urllib.parse

from conftest import request
from test_panel import FORM, clicks, csrf_token, get, log_in, make_panel, own, panel, users  # noqa: F401


def bulk(app, cookie, token, action, ids, headers=None, back="period=last_7_days&status=all"):
    fields = [("csrf_token", token), ("action", action), ("back", back), *(("ids", str(i)) for i in ids)]
    sent = {**FORM, "Cookie": cookie, **(headers or {})}
    return request(app, "/panel/campaigns/bulk", sent, "POST", urllib.parse.urlencode(fields).encode())


def test_the_list_offers_checkboxes_and_archives_and_clones_the_ticked_campaigns(panel, users, clicks, db):  # noqa: F811
    from models.admin.services import get_campaign, list_campaigns, list_streams

    cookie = log_in(panel)
    html = get(panel, "/panel/campaigns", cookie)[2]
    assert 'name="ids" value="1" form="campaign-bulk"' in html and 'value="clone">Clone' in html
    status, headers, _ = bulk(panel, cookie, csrf_token(html), "clone", [1, 2])
    assert status == 303 and headers["location"] == "/panel/campaigns?period=last_7_days&status=all"
    # The list comes back as it was left: its tag, traffic, custom range, columns and sort too.
    shown = "period=custom&from=2026-11-01&to=2026-11-30&traffic=1&tag=push&col=clicks,cr&sort=-clicks,name"
    status, headers, _ = bulk(panel, cookie, csrf_token(html), "clone", [3], back=shown)
    assert status == 303 and headers["location"] == f"/panel/campaigns?{shown}"
    copies = {c.alias: c for c in list_campaigns(db)}
    assert {"gen-0-copy", "gen-1-copy"} <= set(copies) and copies["gen-0-copy"].name == "Generated 0 (copy)"
    assert len(list_streams(db, "gen-0-copy")) == len(list_streams(db, "gen-0"))
    status, _, _ = bulk(panel, cookie, csrf_token(html), "archive", [1, copies["gen-0-copy"].id])
    assert status == 303 and get_campaign(db, 1).status == get_campaign(db, "gen-0-copy").status == "archived"
    assert get_campaign(db, 2).status == "active"


def test_bulk_actions_need_the_rights_on_every_ticked_campaign_and_the_token(panel, users, clicks, db):  # noqa: F811
    from models.accounts.sharing import share_campaign
    from models.admin.services import get_campaign, list_campaigns

    own(db, 1, users["bert"])
    share_campaign(db, 2, "bert")  # Read-only.
    buyer = log_in(panel, "bert")
    html = get(panel, "/panel/campaigns", buyer)[2]
    assert 'name="ids" value="1"' in html and 'name="ids" value="2"' not in html
    token = csrf_token(html)
    assert bulk(panel, buyer, token, "archive", [1, 2])[0] == 403  # Nothing changes, not even 1.
    assert bulk(panel, buyer, token, "archive", [1, 3])[0] == 404
    assert get_campaign(db, 1).status == "active"
    assert bulk(panel, buyer, "x" * 43, "archive", [1])[0] == 403
    assert bulk(panel, buyer, token, "archive", [1], headers={"Origin": "https://evil.example"})[0] == 403
    assert (
        bulk(panel, buyer, token, "delete", [1])[0] == 400
        and bulk(panel, buyer, token, "archive", [])[0] == 400
    )
    assert bulk(panel, buyer, token, "archive", ["1 OR 1=1"])[0] == 400
    assert get_campaign(db, 1).status == "active"
    assert bulk(panel, buyer, token, "clone", [1])[0] == 303
    assert get_campaign(db, "gen-0-copy").owner_id == users["bert"].id
    viewer = log_in(panel, "vera")
    share_campaign(db, 1, "vera")
    html = get(panel, "/panel/campaigns", viewer)[2]
    assert "campaign-bulk" not in html and 'name="ids"' not in html
    assert bulk(panel, viewer, csrf_token(html), "clone", [1])[0] == 403
    assert len(list_campaigns(db)) == 3


def test_ticked_campaign_names_are_escaped_in_their_labels(panel, users, clicks, db):  # noqa: F811
    from models.admin.services import update_campaign

    update_campaign(db, 1, name='"><img src=x onerror=alert(1)>')
    html = get(panel, "/panel/campaigns", log_in(panel))[2]
    assert (
        "<img src=x" not in html and 'aria-label="Choose &#34;&gt;&lt;img src=x onerror=alert(1)&gt;"' in html
    )
