"""The panel's error pages (routes/panel/render.py): a logged-in user's carry the nav and the log-out
button."""

from __future__ import annotations

import test_panel
from conftest import request
from test_panel import csrf_token, get, log_in, post

# The panel fixtures of tests/test_panel.py, shared (assigned, not imported: the names are parameters below).
make_panel, panel, users = test_panel.make_panel, test_panel.panel, test_panel.users

NAV = 'href="/panel/campaigns"'


def test_a_buyer_s_404_and_403_pages_have_the_nav_and_a_working_log_out(panel, users, db):
    from models.admin.services import create_campaign

    create_campaign(db, "Nobody's", "nobodys", offer_url="https://o.example/?s={subid}")  # Not bert's.
    buyer = log_in(panel, "bert")
    # A page that looked the session up, and a path no page routes (looked up for the error page).
    for path in ("/panel/campaigns/1", "/panel/campaigns/999", "/panel/no-such-page"):
        status, headers, html = get(panel, path, buyer)
        assert status == 404 and headers["content-type"].startswith("text/html"), path
        assert NAV in html and 'id="logout"' in html and "bert <small>(buyer)</small>" in html, path
    viewer = log_in(panel, "vera")
    status, _, html = get(panel, "/panel/campaigns/new", viewer)
    assert status == 403 and NAV in html and "vera <small>(viewer)</small>" in html
    # The page's log-out form carries the session's token: it logs out.
    token = csrf_token(get(panel, "/panel/no-such-page", buyer)[2])
    status, headers, _ = post(panel, "/panel/logout", {"csrf_token": token}, cookie=buyer)
    assert status == 303 and headers["location"] == "/panel/login"
    assert get(panel, "/panel/campaigns", buyer)[0] == 303  # Logged out.


def test_an_error_page_without_a_valid_session_has_no_nav_and_is_no_second_error(make_panel, users):
    app = make_panel(LANNER_PANEL_SESSION_HOURS="1")
    buyer = log_in(app, "bert")
    app.clock.advance(3600 + 1)  # Expired.
    for cookie in (buyer, "lanner_session=forged", ""):
        status, _, html = get(app, "/panel/no-such-page", cookie)
        assert status == 404 and "Back to the panel" in html and NAV not in html, cookie
    status, _, body = request(app, "/panel/campaigns/new", {"Cookie": buyer}, "POST", b"name=x")
    assert status == 403 and b"Log in again" in body and NAV.encode() not in body
