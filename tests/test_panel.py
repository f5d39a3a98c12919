"""The web panel (/panel) through the admin worker's app in process, on a real migrated database: sessions,
login throttling, CSRF, roles and escaping. tests/test_panel_browser.py drives it in a real browser."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest
from conftest import Clock, InProcessApp, request

PASSWORD = "correct horse battery"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def make_panel(env, db):
    """Admin apps on the test's database with a clock the test moves (sessions and throttling read it)."""

    def make(**extra_env: str) -> InProcessApp:
        from app import create_admin_app
        from settings import load_settings

        clock = Clock(time.time())
        app = create_admin_app(load_settings({**env, **extra_env}), db=db, clock=clock)
        return InProcessApp(app, clock)

    return make


@pytest.fixture
def panel(make_panel):
    return make_panel()


_password_hashes: list[str] = []


def password_hash() -> str:
    """PASSWORD's argon2id hash with the real parameters, made once per test process."""
    from models.accounts.passwords import hash_password

    if not _password_hashes:
        _password_hashes.append(hash_password(PASSWORD))
    return _password_hashes[0]


@pytest.fixture
def users(db, monkeypatch):
    """Four users, all with PASSWORD. Their one hash is made once per process, not four times a test
    (~20 ms of CPU each; the fixture serves ~400 tests of 24 modules): every login still verifies a
    real argon2id hash, and the users are made by add_user as the panel makes them."""
    from models.accounts import users as accounts

    real = accounts.hash_password
    with monkeypatch.context() as patch:
        patch.setattr(accounts, "hash_password", lambda pw: password_hash() if pw == PASSWORD else real(pw))
        return {
            name: accounts.add_user(db, name, role, PASSWORD, hides_money=name == "frugal")
            for name, role in (("anna", "admin"), ("bert", "buyer"), ("vera", "viewer"), ("frugal", "buyer"))
        }


@pytest.fixture
def clicks(db):
    """250 stored clicks over two campaigns in the last day (campaign 1 `gen-0`, 2 `gen-1`)."""
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 250, 1, campaigns=2, seed=5) == 250
    return 250


def post(app, path, fields, cookie=None, headers=None):
    sent = {**FORM, **({"Cookie": cookie} if cookie else {}), **(headers or {})}
    return request(app, path, sent, "POST", urllib.parse.urlencode(fields).encode())


def cookie_of(headers) -> str:
    return headers["set-cookie"].split(";")[0]


def log_in(app, name="anna", password=PASSWORD, headers=None):
    status, headers, body = post(app, "/panel/login", {"name": name, "password": password}, headers=headers)
    assert status == 303, body
    return cookie_of(headers)


def get(app, path, cookie):
    status, headers, body = request(app, path, {"Cookie": cookie})
    return status, headers, body.decode()


def csrf_token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def session_rows(db) -> int:
    from models.store.rows import fetch_one

    return fetch_one(db.connection(), "SELECT COUNT(*) FROM panel_session")[0]


# -- sessions ------------------------------------------------------------------------------------


def test_a_login_sets_an_httponly_lax_cookie_on_a_new_session_and_opens_the_dashboard(panel, users):
    status, headers, body = request(panel, "/panel")
    assert status == 303 and headers["location"] == "/panel/login?next=%2Fpanel"
    status, headers, _ = post(
        panel, "/panel/login", {"name": "ANNA", "password": PASSWORD, "next": "/panel/campaigns"}
    )
    assert status == 303 and headers["location"] == "/panel/campaigns"
    attributes = [part.strip() for part in headers["set-cookie"].split(";")]
    name, _, value = attributes[0].partition("=")
    assert name == "lanner_session" and len(value) >= 43  # 256 bits, URL-safe base64.
    assert {"HttpOnly", "Path=/", "SameSite=Lax"} <= set(attributes) and "Secure" not in attributes
    status, _, html = get(panel, "/panel", attributes[0])
    assert status == 200 and "Dashboard" in html and "anna" in html
    # The stored row is the id's hash, never the id itself.
    from models.store.rows import fetch_one

    assert (
        fetch_one(panel_db(panel), "SELECT COUNT(*) FROM panel_session WHERE id_hash = ?", (value,))[0] == 0
    )


def panel_db(app):
    from models.store.database import db

    return db.connection()


def test_the_cookie_is_secure_when_a_trusted_proxy_says_https_and_only_then(make_panel, users):
    _, headers, _ = post(
        make_panel(),
        "/panel/login",
        {"name": "anna", "password": PASSWORD},
        headers={"X-Forwarded-Proto": "https"},
    )
    assert "Secure" in headers["set-cookie"]
    # A peer that is no trusted proxy (TCP admin bind, proxies elsewhere) cannot claim HTTPS.
    untrusted = make_panel(LANNER_ADMIN_BIND="127.0.0.1:0", LANNER_TRUSTED_PROXIES="10.0.0.1")
    _, headers, _ = post(
        untrusted,
        "/panel/login",
        {"name": "anna", "password": PASSWORD},
        headers={"X-Forwarded-Proto": "https"},
    )
    assert "Secure" not in headers["set-cookie"]


def test_a_session_expires_after_its_hours_without_a_request_and_each_request_moves_it(make_panel, users):
    panel = make_panel(LANNER_PANEL_SESSION_HOURS="2")
    cookie = log_in(panel)
    panel.clock.advance(90 * 60)
    assert get(panel, "/panel/campaigns", cookie)[0] == 200  # Moves the expiry to 2 h from now.
    panel.clock.advance(90 * 60)
    assert get(panel, "/panel/campaigns", cookie)[0] == 200  # 3 h after login: alive, it slid.
    panel.clock.advance(2 * 3600 + 1)
    status, headers, _ = get(panel, "/panel/campaigns", cookie)
    assert status == 303 and headers["location"].startswith("/panel/login")


def test_the_expiry_is_written_at_most_once_a_minute(make_panel, users, db):
    from models.store.rows import fetch_one

    panel = make_panel()
    cookie = log_in(panel)

    def expiry():
        return fetch_one(db.connection(), "SELECT seen_at, expires_at FROM panel_session")

    first = expiry()
    panel.clock.advance(59)
    get(panel, "/panel/campaigns", cookie)
    assert expiry() == first
    panel.clock.advance(2)
    get(panel, "/panel/campaigns", cookie)
    assert expiry()[1] == first[1] + 61_000


def test_a_login_never_keeps_the_id_the_browser_brought(panel, users, db):
    planted = "lanner_session=" + "A" * 43
    _, headers, _ = post(panel, "/panel/login", {"name": "anna", "password": PASSWORD}, cookie=planted)
    fresh = cookie_of(headers)
    assert fresh != planted and get(panel, "/panel", planted)[0] == 303
    # Logging in again over a live session ends it and opens another.
    _, headers, _ = post(panel, "/panel/login", {"name": "anna", "password": PASSWORD}, cookie=fresh)
    second = cookie_of(headers)
    assert (
        second != fresh and get(panel, "/panel", fresh)[0] == 303 and get(panel, "/panel", second)[0] == 200
    )
    assert session_rows(db) == 1


def test_logging_out_deletes_the_session(panel, users, db):
    cookie = log_in(panel)
    html = get(panel, "/panel", cookie)[2]
    status, headers, _ = post(panel, "/panel/logout", {"csrf_token": csrf_token(html)}, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/login"
    assert (
        "lanner_session=;" in headers["set-cookie"]
        or "Max-Age=0" in headers["set-cookie"]
        or ("expires=" in headers["set-cookie"].lower())
    )
    assert session_rows(db) == 0 and get(panel, "/panel", cookie)[0] == 303


def test_a_disabled_user_s_session_ends(panel, users, db):
    from models.accounts.users import update_user

    cookie = log_in(panel, "bert")
    update_user(db, "bert", is_disabled=True)
    assert get(panel, "/panel", cookie)[0] == 303


# -- login ------------------------------------------------------------------------------------


def test_a_wrong_password_an_unknown_name_and_a_disabled_user_get_one_sentence(panel, users, db):
    from models.accounts.logins import WRONG_LOGIN
    from models.accounts.users import update_user

    update_user(db, "vera", is_disabled=True)
    for name, password in (("anna", "wrong password!"), ("nobody", PASSWORD), ("vera", PASSWORD)):
        status, headers, body = post(panel, "/panel/login", {"name": name, "password": password})
        assert status == 401 and "set-cookie" not in headers
        assert WRONG_LOGIN in body.decode()


def test_an_unknown_name_costs_a_password_verification(panel, users, monkeypatch):
    from models.accounts import logins

    verified = []
    real = logins.verify_password
    monkeypatch.setattr(
        logins, "verify_password", lambda user, pw, **kw: verified.append(user) or real(user, pw, **kw)
    )
    post(panel, "/panel/login", {"name": "nobody", "password": PASSWORD})
    assert len(verified) == 1 and verified[0].password_hash.startswith("$argon2id$")


def whole_seconds(app) -> None:
    """The test's clock on a whole second: advancing it by a Retry-After lands exactly where it said."""
    app.clock.now = float(int(app.clock.now))


def try_login(app, name, password, address):
    status, headers, body = post(app, "/panel/login", {"name": name, "password": password}, headers=address)
    return status, int(headers.get("retry-after", 0)), body.decode()


def test_an_address_spraying_many_names_is_refused_until_its_failures_age_out(panel, users):
    from models.accounts.logins import ADDRESS_LIMIT, WINDOW_MS

    address = {"X-Real-IP": "198.51.100.7"}
    log_in(panel, "bert", headers=address)  # bert has logged in from here before.
    for attempt in range(ADDRESS_LIMIT):
        assert try_login(panel, f"guess{attempt}", "x" * 10, address)[0] == 401
    status, headers, body = post(
        panel, "/panel/login", {"name": "anna", "password": PASSWORD}, headers=address
    )
    assert status == 429 and "set-cookie" not in headers
    assert 0 < int(headers["retry-after"]) <= WINDOW_MS // 1000 and "Too many failed logins" in body.decode()
    # A name that logged in from this address is not refused with it; another address is not refused.
    assert try_login(panel, "bert", PASSWORD, address)[0] == 303
    assert try_login(panel, "anna", PASSWORD, {"X-Real-IP": "198.51.100.8"})[0] == 303
    panel.clock.advance(int(headers["retry-after"]))
    assert try_login(panel, "anna", PASSWORD, address)[0] == 303


def test_a_brute_force_from_one_address_waits_longer_after_each_failure(panel, users):
    from models.accounts.logins import PAIR_FREE, PAIR_WAIT_MS

    whole_seconds(panel)
    address = {"X-Real-IP": "198.51.100.7"}
    for _ in range(PAIR_FREE):
        assert try_login(panel, "bert", "x" * 10, address)[0] == 401
    waits = []
    for _ in range(6):
        status, wait, body = try_login(panel, "bert", PASSWORD, address)  # Refused untried: right or not.
        assert status == 429 and "Too many failed logins" in body
        waits.append(wait)
        panel.clock.advance(wait)
        assert try_login(panel, "bert", "x" * 10, address)[0] == 401
    assert waits[0] == PAIR_WAIT_MS // 1000 and waits == sorted(set(waits)), waits
    # The address tried one name: the others are not refused from it.
    assert try_login(panel, "anna", PASSWORD, address)[0] == 303


def test_the_backoff_of_one_address_and_name_doubles_up_to_its_cap(panel, users):
    from models.accounts.logins import MAX_WAIT_MS, PAIR_FREE, PAIR_WAIT_MS

    whole_seconds(panel)
    home = {"X-Real-IP": "192.0.2.10"}
    log_in(panel, "bert", headers=home)  # Only the pair's backoff applies to a known address.
    for _ in range(PAIR_FREE):
        assert try_login(panel, "bert", "x" * 10, home)[0] == 401
    waits = []
    for _ in range(8):
        status, wait, _ = try_login(panel, "bert", "x" * 10, home)
        assert status == 429
        waits.append(wait)
        panel.clock.advance(wait)
        assert try_login(panel, "bert", "x" * 10, home)[0] == 401
    first = PAIR_WAIT_MS // 1000
    assert waits == [min(first << n, MAX_WAIT_MS // 1000) for n in range(8)], waits
    assert waits[-1] == MAX_WAIT_MS // 1000
    status, wait, _ = try_login(panel, "bert", PASSWORD, home)
    assert status == 429
    panel.clock.advance(wait)
    assert try_login(panel, "bert", PASSWORD, home)[0] == 303  # And a success clears the pair's count.
    assert try_login(panel, "bert", "x" * 10, home)[0] == 401
    assert try_login(panel, "bert", PASSWORD, home)[0] == 303


def test_a_stranger_s_failures_from_other_addresses_never_stop_the_user_at_a_known_address(panel, users):
    """Issue 32: five wrong passwords for `anna` (an admin) from anywhere locked anna out everywhere."""
    from models.accounts.logins import NAME_LIMIT, PAIR_FREE

    whole_seconds(panel)
    home = {"X-Real-IP": "192.0.2.10"}
    log_in(panel, "anna", headers=home)
    stranger = {"X-Real-IP": "203.0.113.66"}
    for _ in range(PAIR_FREE):
        assert try_login(panel, "anna", "x" * 10, stranger)[0] == 401
    assert try_login(panel, "anna", PASSWORD, stranger)[0] == 429  # The stranger's own pair waits.
    for n in range(NAME_LIMIT * 2):  # And a spread guess, each address once.
        status = try_login(panel, "anna", "x" * 10, {"X-Real-IP": f"203.0.113.{n + 100}"})[0]
        assert status in (401, 429)
    assert try_login(panel, "anna", PASSWORD, {"X-Real-IP": "198.51.100.99"})[0] == 429
    assert try_login(panel, "anna", PASSWORD, home)[0] == 303
    assert try_login(panel, "anna", PASSWORD, {"X-Real-IP": "192.0.2.10"})[0] == 303


def test_a_guess_spread_over_many_addresses_is_refused_to_addresses_the_user_never_logged_in_from(
    panel, users, caplog
):
    from models.accounts.logins import NAME_LIMIT, WINDOW_MS

    whole_seconds(panel)
    home = {"X-Real-IP": "192.0.2.10"}
    log_in(panel, "bert", headers=home)
    for attempt in range(NAME_LIMIT):
        ip = {"X-Real-IP": f"203.0.113.{attempt + 1}"}
        assert try_login(panel, "Bert", "x" * 10, ip)[0] == 401
    assert f"{NAME_LIMIT} failed logins as 'bert'" in caplog.text  # OWASP: a lockout is logged.
    fresh = {"X-Real-IP": "203.0.113.50"}
    status, wait, body = try_login(panel, "bert", PASSWORD, fresh)
    assert status == 429 and WINDOW_MS // 1000 - 60 < wait <= WINDOW_MS // 1000
    assert try_login(panel, "anna", PASSWORD, fresh)[0] == 303  # Other names are not refused.
    assert try_login(panel, "bert", PASSWORD, home)[0] == 303  # Nor bert where he logged in before.
    # A name nobody has is refused the same way: a lockout does not tell which names exist.
    for attempt in range(NAME_LIMIT):
        try_login(panel, "nobody", "x" * 10, {"X-Real-IP": f"198.51.100.{attempt + 1}"})
    assert try_login(panel, "nobody", "x" * 10, fresh)[0] == 429
    panel.clock.advance(wait)
    assert try_login(panel, "bert", PASSWORD, fresh)[0] == 303


def test_an_ipv6_client_s_whole_64_counts_as_one_address():
    from models.accounts.logins import address_key

    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:198.51.100.7") == address_key("198.51.100.7") == "198.51.100.7"
    assert address_key("not an address" * 10) == ("not an address" * 10)[:64]


def test_failures_kept_stay_bounded_per_address_and_old_ones_are_deleted(panel, users, db):
    from models.accounts.logins import ADDRESS_LIMIT, KNOWN_ADDRESSES, WINDOW_MS
    from models.store.rows import fetch_one

    def rows(sql, params=()):
        return fetch_one(db.connection(), sql, params)[0]

    address = {"X-Real-IP": "198.51.100.7"}
    for attempt in range(ADDRESS_LIMIT * 3):  # Refused attempts write nothing.
        try_login(panel, f"name{attempt}", "x" * 10, address)
    assert rows("SELECT COUNT(*) FROM login_failure WHERE address = ?", ("198.51.100.7",)) == ADDRESS_LIMIT
    panel.clock.advance(WINDOW_MS // 1000 + 1)
    try_login(panel, "someone", "x" * 10, {"X-Real-IP": "198.51.100.8"})
    assert rows("SELECT COUNT(*) FROM login_failure") == 1  # Each failure deletes those past the window.
    # The addresses a user logged in from: written by a right password only, the newest few kept.
    for n in range(KNOWN_ADDRESSES + 5):
        panel.clock.advance(1)
        log_in(panel, "anna", headers={"X-Real-IP": f"192.0.2.{n + 1}"})
    assert rows("SELECT COUNT(*) FROM login_address") == KNOWN_ADDRESSES
    kept = {row[0] for row in db.connection().execute("SELECT address FROM login_address").fetchall()}
    assert kept == {f"192.0.2.{n + 1}" for n in range(5, KNOWN_ADDRESSES + 5)}


def test_failures_outlive_the_app_that_counted_them(make_panel, users):
    """Kept in the database: the admin worker exits when idle, and a new one still knows."""
    from models.accounts.logins import NAME_LIMIT

    first = make_panel()
    for attempt in range(NAME_LIMIT):
        try_login(first, "anna", "x" * 10, {"X-Real-IP": f"192.0.2.{attempt + 1}"})
    assert post(make_panel(), "/panel/login", {"name": "anna", "password": PASSWORD})[0] == 429


# -- CSRF and origin --------------------------------------------------------------------------


def test_writes_without_the_session_s_token_or_from_another_site_are_refused(panel, users, clicks, db):
    from models.admin.services import get_campaign

    cookie = log_in(panel)
    token = csrf_token(get(panel, "/panel/campaigns", cookie)[2])
    pause = {"status": "paused"}
    assert post(panel, "/panel/campaigns/1/status", pause, cookie=cookie)[0] == 403
    assert (
        post(panel, "/panel/campaigns/1/status", {**pause, "csrf_token": "x" * 43}, cookie=cookie)[0] == 403
    )
    other = log_in(panel, "anna")  # Another session's token is not this one's.
    assert post(panel, "/panel/campaigns/1/status", {**pause, "csrf_token": token}, cookie=other)[0] == 403
    assert post(panel, "/panel/logout", {}, cookie=other)[0] == 403
    fields = {**pause, "csrf_token": token}
    for header in (
        {"Origin": "https://evil.example"},
        {"Referer": "https://evil.example/page"},
        {"Origin": "null"},
    ):
        status, _, body = post(panel, "/panel/campaigns/1/status", fields, cookie=cookie, headers=header)
        assert status == 403 and b"another site" in body
    assert get_campaign(db, 1).status == "active"
    status, headers, _ = post(
        panel, "/panel/campaigns/1/status", fields, cookie=cookie, headers={"Origin": "http://127.0.0.1"}
    )
    assert status == 303 and get_campaign(db, 1).status == "paused"
    # The login form has no session yet: its Origin is checked.
    status, _, _ = post(
        panel,
        "/panel/login",
        {"name": "anna", "password": PASSWORD},
        headers={"Origin": "https://evil.example"},
    )
    assert status == 403


# -- roles, money, escaping -------------------------------------------------------------------


def own(db, campaign_id, user):
    from models.admin.services import update_campaign

    update_campaign(db, campaign_id, owner_id=user.id)


def chart_of(html: str) -> dict:
    return json.loads(
        re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', html).group(1)
    )


def test_a_buyer_sees_only_their_campaigns_on_the_dashboard_and_the_list(panel, users, clicks, db):
    own(db, 2, users["bert"])
    admin = log_in(panel, "anna")
    buyer = log_in(panel, "bert")
    everything = get(panel, "/panel?period=last_7_days", admin)[2]
    assert sum(chart_of(everything)["series"]["clicks"]) == 250
    assert "Generated 0" in everything and "Generated 1" in everything
    html = get(panel, "/panel?period=last_7_days", buyer)[2]
    theirs = sum(chart_of(html)["series"]["clicks"])
    assert 0 < theirs < 250
    assert "Generated 1" in html and "Generated 0" not in html
    html = get(panel, "/panel/campaigns?period=last_7_days", buyer)[2]
    assert "gen-1" in html and "gen-0" not in html
    assert (
        re.search(r'class="total">.*?<td class="n"[^>]*>([\d,]+)</td>', html, re.S).group(1) == f"{theirs:,}"
    )
    # A buyer with no campaign sees empty pages, not everybody's.
    nobody = log_in(panel, "frugal")
    html = get(panel, "/panel?period=last_7_days", nobody)[2]
    assert sum(chart_of(html)["series"]["clicks"]) == 0 and "gen-" not in html


def test_a_user_who_hides_money_sees_no_amounts(panel, users, clicks, db):
    own(db, 1, users["frugal"])
    cookie = log_in(panel, "frugal")
    for path in ("/panel?period=last_7_days", "/panel/campaigns?period=last_7_days"):
        html = get(panel, path, cookie)[2]
        assert "gen-0" in html or "Generated 0" in html
        assert "Revenue" not in html and "Profit" not in html and " USD" not in html
    assert set(chart_of(get(panel, "/panel", cookie)[2])["series"]) == {"clicks", "conversions"}


def test_a_viewer_s_forms_are_refused_and_it_is_offered_none(panel, users, clicks, db):
    from models.accounts.sharing import share_campaign
    from models.admin.services import get_campaign

    share_campaign(db, 1, "vera")
    share_campaign(db, 2, "bert")  # Read-only share: the buyer may see it, not pause it.
    viewer = log_in(panel, "vera")
    html = get(panel, "/panel/campaigns", viewer)[2]
    assert "gen-0" in html and "Pause" not in html
    fields = {"status": "paused", "csrf_token": csrf_token(html)}
    assert post(panel, "/panel/campaigns/1/status", fields, cookie=viewer)[0] == 403
    assert post(panel, "/panel/campaigns/2/status", fields, cookie=viewer)[0] == 404  # Not shared with vera.
    buyer = log_in(panel, "bert")
    fields["csrf_token"] = csrf_token(get(panel, "/panel/campaigns", buyer)[2])
    assert post(panel, "/panel/campaigns/2/status", fields, cookie=buyer)[0] == 403
    assert get_campaign(db, 1).status == get_campaign(db, 2).status == "active"


def test_user_controlled_strings_come_out_escaped(panel, users, clicks, db):
    from models.admin.services import update_campaign

    update_campaign(db, 1, name='<script>alert("x")</script>')
    cookie = log_in(panel)
    for path in ("/panel?period=last_7_days", "/panel/campaigns?period=last_7_days&q=%3Cscript%3E"):
        html = get(panel, path, cookie)[2]
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    status, _, body = post(panel, "/panel/login", {"name": "<img src=x onerror=alert(1)>", "password": "x"})
    assert status == 401 and b"<img" not in body and b"&lt;img" in body


def test_the_campaign_list_searches_filters_by_status_and_totals(panel, users, clicks, db):
    from models.admin.services import update_campaign

    update_campaign(db, 2, status="paused")
    cookie = log_in(panel)
    html = get(panel, "/panel/campaigns?period=last_7_days", cookie)[2]
    assert "gen-0" in html and "gen-1" in html and "http://127.0.0.1/gen-0" in html
    assert re.search(r'class="total">.*?<td class="n"[^>]*>([\d,]+)</td>', html, re.S).group(1) == "250"
    html = get(panel, "/panel/campaigns?period=last_7_days&status=paused", cookie)[2]
    assert "gen-1" in html and "gen-0" not in html
    html = get(panel, "/panel/campaigns?period=last_7_days&q=GEN-0", cookie)[2]
    assert "gen-0" in html and "gen-1" not in html
    assert get(panel, "/panel/campaigns?status=deleted", cookie)[0] == 400
    assert get(panel, "/panel?period=forever", cookie)[0] == 400


def test_pages_forbid_inline_scripts_and_the_vendored_libraries_are_served(panel, users):
    status, headers, _ = request(panel, "/panel/login")
    assert (
        "script-src 'self'" in headers["content-security-policy"] and headers["cache-control"] == "no-store"
    )
    for name in (
        "htmx-2.0.11.min.js",
        "uPlot-1.6.32.iife.min.js",
        "uPlot-1.6.32.min.css",
        "panel.js",
        "panel.css",
    ):
        status, _, body = request(panel, f"/panel/static/{name}")
        assert status == 200 and len(body) > 500, name


def test_after_login_only_a_panel_path_is_followed(panel, users):
    for target in (
        "https://evil.example/",
        "//evil.example/panel",
        "/api/v1/campaigns",
        "/panel\\@evil",
        "/panelx",
    ):
        status, headers, _ = post(
            panel, "/panel/login", {"name": "anna", "password": PASSWORD, "next": target}
        )
        assert status == 303 and headers["location"] == "/panel"


def test_campaign_urls_name_the_web_port_when_the_panel_is_opened_on_the_admin_port(
    make_panel, users, clicks
):
    panel = make_panel(LANNER_BIND="127.0.0.1:8080", LANNER_ADMIN_BIND="127.0.0.1:8081")
    cookie = log_in(panel)
    status, _, body = request(panel, "/panel/campaigns", {"Cookie": cookie, "Host": "127.0.0.1:8081"})
    assert status == 200 and "http://127.0.0.1:8080/gen-0" in body.decode()
    # Behind nginx (the admin unix socket), the browser's own host.
    html = get(make_panel(), "/panel/campaigns", cookie)[2]
    assert "http://127.0.0.1/gen-0" in html


def test_the_panel_s_errors_are_pages_and_the_api_s_stay_json(panel, users):
    cookie = log_in(panel)
    status, headers, body = request(panel, "/panel?period=%3Cforever%3E", {"Cookie": cookie})
    assert status == 400 and headers["content-type"].startswith("text/html")
    assert b"Unknown period" in body and b"<forever>" not in body
    status, headers, _ = request(panel, "/api/v1/campaigns")
    assert status == 401 and headers["content-type"].startswith("application/json")


def test_panel_is_no_campaign_alias(db):
    from models.admin.services import AdminError, create_campaign

    with pytest.raises(AdminError, match="panel"):
        create_campaign(db, "Panel", "panel", offer_url="https://example.com/")


def test_the_dashboard_says_what_its_amounts_leave_out(panel, users, db, settings, make_tracker):
    from models.admin.services import create_campaign, update_campaign
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit
    from models.migrations.deferred import run_deferred

    create_campaign(db, "Old", "old", offer_url="https://o.example/?s={subid}")
    # As a campaign set up before currencies were converted could be (tests/test_currency.py).
    db.connection().execute("UPDATE campaign SET cost_model = 'cpc', cost_value = 0.5, cost_currency = 'CHF'")
    run_deferred(db)
    tracker = make_tracker()
    tracker.refresh()
    tracker.track(tracker.campaign("old"), Visit(ip="198.51.100.1", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    html = get(panel, "/panel", log_in(panel))[2]
    assert re.search(r'<p class="note">Campaign old&#39;s costs are in CHF', html)
    update_campaign(db, "old", owner_id=users["frugal"].id)
    assert "CHF" not in get(panel, "/panel", log_in(panel, "frugal"))[2]  # It names money.


def test_0009_upgrades_an_install_from_0008_with_its_users(settings, env):
    from app import create_admin_app
    from models.accounts.passwords import hash_password
    from models.migrations.runner import migrate, schema_is_current
    from models.store.database import db as database
    from models.store.database import open_database
    from settings import load_settings

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0008_accounts")
        database.execute_sql(  # As 0008's code added users (add_user writes 0010's columns now).
            "INSERT INTO app_user (name, role, password_hash, created_at, updated_at) "
            "VALUES (?, 'admin', ?, 0, 0)",
            ("anna", hash_password(PASSWORD)),
        )
        assert migrate(database)[:1] == ["0009_panel_sessions"] and schema_is_current(database)
        panel = InProcessApp(create_admin_app(load_settings(env), db=database), Clock(time.time()))
        assert get(panel, "/panel", log_in(panel))[0] == 200
    finally:
        database.close()
