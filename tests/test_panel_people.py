"""The panel's people and install pages in process, on a real migrated database: the per-user timezone
(dashboard, campaign list, chart), /panel/account, /panel/users, /panel/audit and /panel/status, with
their roles, CSRF, escaping and audit entries; migration 0010 on an install upgraded from 0009."""

from __future__ import annotations

import dataclasses
import re
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from conftest import Clock, InProcessApp
from test_panel import PASSWORD, chart_of, csrf_token, get, log_in, post, users  # noqa: F401 (a fixture)

# ruff: noqa: F811 (the fixture imported above, taken as an argument)

NEW_YORK = ZoneInfo("America/New_York")


@pytest.fixture
def make_panel(env, db):
    def make(**extra_env: str) -> InProcessApp:
        from app import create_admin_app
        from settings import load_settings

        clock = Clock(time.time())
        return InProcessApp(create_admin_app(load_settings({**env, **extra_env}), db=db, clock=clock), clock)

    return make


@pytest.fixture
def panel(make_panel):
    return make_panel()


def audit_entries(db, entity=None):
    from models.accounts.audit import list_audit

    return list_audit(db, entity=entity, limit=100)


def form_of(html: str, action: str) -> str:
    match = re.search(rf'<form method="post" action="{re.escape(action)}".*?</form>', html, re.S)
    assert match, action
    return match.group(0)


# -- the per-user timezone ---------------------------------------------------------------------


def track_at(make_tracker, settings, db, at: datetime, campaign: str = "tz") -> None:
    from models.clicks.spool import flush_spool
    from models.clicks.visit import Visit

    tracker = make_tracker(clock=Clock(at.timestamp()))
    tracker.refresh()
    tracker.track(tracker.campaign(campaign), Visit(ip="198.51.100.3", user_agent="Mozilla/5.0 UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)


def test_a_user_in_new_york_sees_today_as_their_day(panel, users, db, settings, make_tracker):
    from models.accounts.users import update_user
    from models.admin.services import create_campaign
    from models.migrations.deferred import run_deferred

    create_campaign(db, "Timezones", "tz", offer_url="https://o.example/?s={subid}")
    run_deferred(db)
    new_york_today = datetime.now(NEW_YORK).date()
    # 03:00 UTC on New York's today is 22:00 or 23:00 of New York's yesterday.
    at = datetime(new_york_today.year, new_york_today.month, new_york_today.day, 3, tzinfo=UTC)
    track_at(make_tracker, settings, db, at)
    update_user(db, "bert", timezone="America/New_York")
    update_user(db, "anna", timezone="")  # The default: UTC.
    from models.admin.services import update_campaign

    update_campaign(db, "tz", owner_id=users["bert"].id)
    buyer, admin = log_in(panel, "bert"), log_in(panel, "anna")

    def clicks_on(cookie, period):
        html = get(panel, f"/panel?period={period}", cookie)[2]
        return sum(chart_of(html)["series"]["clicks"]), html

    assert clicks_on(buyer, "today")[0] == 0
    count, html = clicks_on(buyer, "yesterday")
    assert count == 1 and 'class="tz">America/New_York<' in html
    chart = chart_of(html)
    assert chart["timezone"] == "America/New_York" and len(chart["x"]) == 24
    hit = chart["series"]["clicks"].index(1)
    assert chart["x"][hit] == int(at.timestamp())  # The bucket's first instant: New York's 22:00 (23:00).
    assert datetime.fromtimestamp(chart["x"][0], NEW_YORK).hour == 0  # New York's midnight first.
    # The campaign list follows the zone too.
    listed = get(panel, "/panel/campaigns?period=yesterday", buyer)[2]
    assert re.search(r'class="total">.*?<td class="n"[^>]*>([\d,]+)</td>', listed, re.S).group(1) == "1"
    listed = get(panel, "/panel/campaigns?period=today", buyer)[2]
    assert re.search(r'class="total">.*?<td class="n"[^>]*>([\d,]+)</td>', listed, re.S).group(1) == "0"
    # In UTC the click is on New York's today's date: today, unless UTC is a day ahead already.
    utc_period = "today" if datetime.now(UTC).date() == new_york_today else "yesterday"
    assert clicks_on(admin, utc_period)[0] == 1
    assert chart_of(get(panel, "/panel", admin)[2])["timezone"] == "UTC"


def test_the_chart_s_buckets_are_the_report_s_hours_through_clock_changes():
    from models.reporting.reports import time_buckets
    from models.reporting.timerange import local_instant

    berlin = ZoneInfo("Europe/Berlin")

    def day(text, tz):
        start = local_instant(text, tz, is_end=False)
        return time_buckets("hour", tz, start, local_instant(text, tz, is_end=True))

    autumn = day("2026-10-25", berlin)
    labels = [label for label, _ in autumn]
    assert len(autumn) == 25 and labels[2:4] == ["2026-10-25 02:00+02:00", "2026-10-25 02:00+01:00"]
    assert [b - a for (_, a), (_, b) in zip(autumn, autumn[1:], strict=False)] == [3_600_000] * 24
    spring = [label for label, _ in day("2026-03-29", berlin)]
    assert len(spring) == 23 and "2026-03-29 02:00" not in spring
    india = day("2026-03-29", ZoneInfo("Asia/Kolkata"))
    assert len(india) == 24 and india[0][0] == "2026-03-29 00:00"
    month = time_buckets(
        "day",
        berlin,
        local_instant("2026-10-01", berlin, is_end=False),
        local_instant("2026-10-31", berlin, is_end=True),
    )
    assert [label for label, _ in month][24:26] == ["2026-10-25", "2026-10-26"] and len(month) == 31
    assert month[25][1] - month[24][1] == 25 * 3_600_000  # The long day.


def test_a_login_records_the_last_login_time(panel, users, db):
    from models.accounts.users import get_user

    assert get_user(db, "bert").last_login_at is None
    panel.clock.advance(10)
    log_in(panel, "bert")
    assert get_user(db, "bert").last_login_at == int(panel.clock() * 1000)
    assert not any("last_login_at" in e.new_values for e in audit_entries(db, "user"))  # No change.


# -- /panel/account ----------------------------------------------------------------------------


def test_every_user_sets_their_own_timezone_audited_and_a_bad_one_is_refused(panel, users, db):
    from models.accounts.users import get_user

    viewer = log_in(panel, "vera")  # A viewer too: it is their own account, not the install's data.
    html = get(panel, "/panel/account", viewer)[2]
    assert '<option value="America/New_York">' in html and "Change password" in html
    token = csrf_token(html)
    assert post(panel, "/panel/account/timezone", {"timezone": "Asia/Tokyo"}, cookie=viewer)[0] == 403
    status, headers, _ = post(
        panel, "/panel/account/timezone", {"timezone": "Asia/Tokyo", "csrf_token": token}, cookie=viewer
    )
    assert status == 303 and headers["location"] == "/panel/account?done=timezone"
    assert get_user(db, "vera").timezone == "Asia/Tokyo"
    html = get(panel, "/panel/account?done=timezone", viewer)[2]
    assert "Your timezone is saved." in html and '<option value="Asia/Tokyo" selected>' in html
    assert 'class="tz">Asia/Tokyo<' in get(panel, "/panel", viewer)[2]  # The session follows at once.
    entry = audit_entries(db, "user")[0]
    assert (entry.actor, entry.action, entry.old_values, entry.new_values) == (
        "vera",
        "update",
        {"timezone": ""},
        {"timezone": "Asia/Tokyo"},
    )
    status, _, body = post(
        panel,
        "/panel/account/timezone",
        {"timezone": "<script>x</script>", "csrf_token": token},
        cookie=viewer,
    )
    assert status == 400 and "Unknown timezone" in body.decode() and "<script>x" not in body.decode()
    assert get_user(db, "vera").timezone == "Asia/Tokyo"


def test_a_password_change_needs_the_current_one_and_the_rules_and_is_audited(panel, users, db):
    from models.accounts.passwords import verify_password
    from models.accounts.users import get_user

    cookie = log_in(panel, "bert")
    elsewhere = log_in(panel, "bert")  # Another browser of bert's (or whoever knew the old password).
    token = csrf_token(get(panel, "/panel/account", cookie)[2])
    new = "a much better passphrase"

    def change(current, password, again=None):
        fields = {"password": current, "new_password": password, "confirm_password": again or password}
        return post(panel, "/panel/account/password", {**fields, "csrf_token": token}, cookie=cookie)

    status, _, body = change("wrong password", new)
    assert status == 400 and "The current password is wrong." in body.decode()
    status, _, body = change(PASSWORD, "short")
    assert status == 400 and "at least 10 characters" in body.decode()
    status, _, body = change(PASSWORD, new, "something else")
    assert status == 400 and "differ" in body.decode()
    assert verify_password(get_user(db, "bert"), PASSWORD)
    status, headers, _ = change(PASSWORD, new)
    assert status == 303 and headers["location"] == "/panel/account?done=password"
    assert verify_password(get_user(db, "bert"), new) and not verify_password(get_user(db, "bert"), PASSWORD)
    assert (
        get(panel, "/panel/account", cookie)[0] == 200 and get(panel, "/panel/account", elsewhere)[0] == 303
    )
    entry = audit_entries(db, "user")[0]
    assert (entry.actor, entry.action, entry.old_values, entry.new_values) == ("bert", "passwd", {}, {})
    assert post(panel, "/panel/login", {"name": "bert", "password": new})[0] == 303


def test_guessing_the_current_password_is_throttled_as_logins_are(panel, users, db):
    from models.accounts.users import get_user

    cookie = log_in(panel, "bert")  # A stolen session: it does not know the password.
    token = csrf_token(get(panel, "/panel/account", cookie)[2])
    guess = {"new_password": "x" * 12, "confirm_password": "x" * 12, "csrf_token": token}
    logged_in_at = get_user(db, "bert").last_login_at
    for attempt in range(5):
        fields = {**guess, "password": f"guess {attempt}!"}
        assert post(panel, "/panel/account/password", fields, cookie=cookie)[0] == 400
    fields = {**guess, "password": PASSWORD}
    status, headers, body = post(panel, "/panel/account/password", fields, cookie=cookie)
    assert status == 429 and int(headers["retry-after"]) > 0 and "Too many failed logins" in body.decode()
    assert post(panel, "/panel/login", {"name": "bert", "password": PASSWORD})[0] == 429  # One count.
    panel.clock.advance(int(headers["retry-after"]))
    assert post(panel, "/panel/account/password", fields, cookie=cookie)[0] == 303
    assert get_user(db, "bert").last_login_at == logged_in_at  # A check, not a login.


# -- /panel/users ------------------------------------------------------------------------------


def test_only_admins_open_the_users_pages(panel, users, db):
    admin = log_in(panel, "anna")
    html = get(panel, "/panel/users", admin)[2]
    assert 'href="/panel/users"' in html and all(f">{name}</a>" in html for name in users)
    for name in ("bert", "vera"):
        cookie = log_in(panel, name)
        page = get(panel, "/panel", cookie)[2]
        assert 'href="/panel/users"' not in page and 'href="/panel/account"' in page
        assert get(panel, "/panel/users", cookie)[0] == 403
        assert get(panel, f"/panel/users/{users['bert'].id}", cookie)[0] == 403
        token = csrf_token(page)
        fields = {"name": "mallory", "role": "admin", "password": PASSWORD, "csrf_token": token}
        assert post(panel, "/panel/users", fields, cookie=cookie)[0] == 403
        assert (
            post(panel, f"/panel/users/{users['bert'].id}/remove", {"csrf_token": token}, cookie=cookie)[0]
            == 403
        )
    assert get(panel, "/panel/users/999", admin)[0] == 404


def test_an_admin_adds_edits_resets_and_removes_users_with_the_last_admin_refused(panel, users, db):
    from models.accounts.passwords import verify_password
    from models.accounts.users import add_user, find_user, get_user

    admin = log_in(panel, "anna")
    token = csrf_token(get(panel, "/panel/users", admin)[2])
    fields = {
        "name": "nina",
        "role": "buyer",
        "password": PASSWORD,
        "timezone": "Europe/Paris",
        "hides_money": "1",
    }
    assert post(panel, "/panel/users", fields, cookie=admin)[0] == 403  # No token.
    status, headers, _ = post(panel, "/panel/users", {**fields, "csrf_token": token}, cookie=admin)
    assert status == 303 and headers["location"] == "/panel/users?done=added"
    nina = get_user(db, "nina")
    assert (nina.role, nina.hides_money, nina.timezone) == ("buyer", True, "Europe/Paris")
    status, _, body = post(
        panel, "/panel/users", {**fields, "name": "NINA", "csrf_token": token}, cookie=admin
    )
    assert status == 400 and "exists already" in body.decode() and 'value="NINA"' in body.decode()
    status, _, body = post(
        panel, "/panel/users", {**fields, "name": "x y", "csrf_token": token}, cookie=admin
    )
    assert status == 400 and "A user name must be" in body.decode()

    page = f"/panel/users/{nina.id}"
    edit = {"role": "viewer", "timezone": "", "is_disabled": "1", "csrf_token": token}
    status, headers, _ = post(panel, page, edit, cookie=admin)
    assert status == 303 and headers["location"] == page + "?done=saved"
    nina = get_user(db, "nina")
    assert (nina.role, nina.hides_money, nina.is_disabled, nina.timezone) == ("viewer", False, True, "")
    entry = audit_entries(db, "user")[0]
    assert entry.actor == "anna" and entry.new_values == {
        "role": "viewer",
        "hides_money": False,
        "is_disabled": True,
        "timezone": "",
    }

    reset = {"new_password": "another long one", "confirm_password": "another long one", "csrf_token": token}
    bert = log_in(panel, "bert")
    assert post(panel, f"/panel/users/{users['bert'].id}/password", reset, cookie=admin)[0] == 303
    assert get(panel, "/panel", bert)[0] == 303 and get(panel, "/panel", admin)[0] == 200  # Bert is out.
    assert post(panel, page + "/password", reset, cookie=admin)[0] == 303
    enabled = dataclasses.replace(
        get_user(db, "nina"), is_disabled=False
    )  # A disabled user's never verifies.
    assert verify_password(enabled, "another long one")
    assert audit_entries(db, "user")[0].action == "passwd"

    # The last enabled admin: demoting, disabling or removing anna is refused with the sentence.
    own = f"/panel/users/{users['anna'].id}"
    for path, sent in (
        (own, {"role": "buyer"}),
        (own, {"role": "admin", "is_disabled": "1"}),
        (own + "/remove", {}),
    ):
        status, _, body = post(panel, path, {**sent, "csrf_token": token}, cookie=admin)
        assert status == 400 and "is the last enabled admin" in body.decode(), path
    assert get_user(db, "anna").role == "admin" and not get_user(db, "anna").is_disabled

    status, headers, _ = post(panel, page + "/remove", {"csrf_token": token}, cookie=admin)
    assert status == 303 and headers["location"] == "/panel/users?done=removed"
    assert find_user(db, "nina") is None and audit_entries(db, "user")[0].action == "remove"
    assert "The user is removed." in get(panel, "/panel/users?done=removed", admin)[2]
    # With another admin, anna may step down; her next page is the dashboard, the users pages 403.
    add_user(db, "olga", "admin", PASSWORD)
    status, headers, _ = post(panel, own, {"role": "buyer", "csrf_token": token}, cookie=admin)
    assert status == 303 and headers["location"] == "/panel" and get(panel, "/panel/users", admin)[0] == 403


def test_shares_and_api_keys_from_a_user_s_page_the_key_shown_once(panel, users, db):
    from models.accounts.access import visible_campaign_ids
    from models.accounts.apikeys import authenticate_api_key, list_api_keys
    from models.accounts.principal import user_principal
    from models.admin.services import create_campaign

    campaign = create_campaign(db, '"><img src=x onerror=alert(1)>', "shared", offer_url="https://o.example/")
    admin = log_in(panel, "anna")
    bert = users["bert"]
    page = f"/panel/users/{bert.id}"
    html = get(panel, page, admin)[2]
    assert "<img src=x" not in html and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    token = csrf_token(html)
    share = {"campaign": str(campaign.id), "may_edit": "1", "csrf_token": token}
    status, headers, _ = post(panel, page + "/share", share, cookie=admin)
    assert status == 303 and headers["location"] == page + "?done=shared"

    assert visible_campaign_ids(db, user_principal(bert.id, "bert", "buyer", False)) == {campaign.id}
    html = get(panel, page, admin)[2]
    assert "Unshare" in html and ">edit<" in html
    status, _, body = post(panel, f"/panel/users/{users['anna'].id}/share", share, cookie=admin)
    assert status == 400 and "is an admin and sees every campaign already" in body.decode()
    assert post(panel, f"{page}/shares/{campaign.id}/remove", {"csrf_token": token}, cookie=admin)[0] == 303
    assert visible_campaign_ids(db, user_principal(bert.id, "bert", "buyer", False)) == set()
    assert [e.action for e in audit_entries(db, "campaign")[:2]] == ["unshare", "share"]

    status, headers, body = post(
        panel, page + "/keys", {"scope": "read", "label": "<b>bot</b>", "csrf_token": token}, cookie=admin
    )
    # POST/redirect/GET: the key rides to the page once, sealed in a cookie for that page only.
    assert status == 303 and headers["location"] == page and body == b""
    flash = headers["set-cookie"]
    assert flash.startswith("lanner_flash=") and f"Path={page}" in flash and "HttpOnly" in flash
    status, headers, html = get(panel, page, f"{admin}; {flash.split(';')[0]}")
    assert status == 200 and "not shown again" in html and "<b>bot" not in html
    key = re.search(r'value="(lnr_[^"]+)" aria-label="New API key"', html).group(1)
    assert key not in flash and authenticate_api_key(db, key).name == "bert"
    assert headers["set-cookie"].startswith('lanner_flash="";') and "1970" in headers["set-cookie"]
    assert key not in get(panel, page, admin)[2]  # The reload: only its prefix from now on, no new key.
    # The cookie is nothing to another session, or on another page, or after two minutes.
    other = log_in(panel, "anna")
    assert key not in get(panel, page, f"{other}; {flash.split(';')[0]}")[2]
    assert key not in get(panel, f"/panel/users/{users['vera'].id}", f"{admin}; {flash.split(';')[0]}")[2]
    panel.clock.advance(121)
    assert key not in get(panel, page, f"{admin}; {flash.split(';')[0]}")[2]
    (stored,) = [k for k in list_api_keys(db) if k.user_id == bert.id]
    vera_page = f"/panel/users/{users['vera'].id}"
    status, _, body = post(panel, vera_page + "/keys", {"scope": "write", "csrf_token": token}, cookie=admin)
    assert status == 400 and "is a viewer, who never writes" in body.decode()
    assert post(panel, f"{vera_page}/keys/{stored.id}/revoke", {"csrf_token": token}, cookie=admin)[0] == 404
    assert post(panel, f"{page}/keys/{stored.id}/revoke", {"csrf_token": token}, cookie=admin)[0] == 303
    assert authenticate_api_key(db, key) is None
    assert [e.action for e in audit_entries(db, "api_key")] == ["revoke", "create"]


# -- /panel/audit ------------------------------------------------------------------------------


def test_the_audit_log_is_admins_only_newest_first_filtered_paged_and_escaped(panel, users, db):
    from models.accounts.principal import user_principal
    from models.admin.services import create_campaign, update_campaign
    from routes.panel import system

    bert = user_principal(users["bert"].id, "bert", "buyer", False)
    create_campaign(db, "First", "first", offer_url="https://o.example/", owner_id=users["bert"].id)
    update_campaign(db, "first", name='<script>alert("audit")</script>', actor=bert)
    admin = log_in(panel, "anna")
    for name in ("bert", "vera"):
        assert get(panel, "/panel/audit", log_in(panel, name))[0] == 403
    html = get(panel, "/panel/audit", admin)[2]
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#34;audit&#34;)&lt;/script&gt;" in html
    assert re.search(r"<del>First</del> → <ins>&lt;script&gt;", html)
    # Newest first: the rename, then the campaign's creation, then the users' (by the CLI).
    rows = re.findall(r'<td class="when">.*?</td>\s*<td>(.*?)</td>\s*<td>(\w+)', html, re.S)
    assert rows[:2] == [("bert", "update"), ("cli", "create")] and len(rows) == len(audit_entries(db))
    html = get(panel, "/panel/audit?actor=BERT", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == 1
    html = get(panel, "/panel/audit?entity=user", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == len(users)
    html = get(panel, f"/panel/audit?entity=user&entity_id={users['vera'].id}", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == 1 and "viewer" in html
    assert get(panel, "/panel/audit?entity=planet", admin)[0] == 200  # A type with no entries: none.
    assert get(panel, "/panel/audit?entity=%3Cb%3E", admin)[0] == 400
    assert 'value="api_key"' not in html and '<option value="campaign">' in html  # Types logged.
    assert get(panel, "/panel/audit?period=forever", admin)[0] == 400
    # The filter form as a browser sends it, blanks included; a bad number is a 400 page.
    html = get(panel, "/panel/audit?period=all_time&actor=&entity=user&entity_id=", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == len(users)
    assert get(panel, "/panel/audit?cursor=x", admin)[0] == 400
    assert len(re.findall(r'<td class="when">', get(panel, "/panel/audit?period=yesterday", admin)[2])) == 0
    # A custom range (the admin's timezone, the end date inclusive) wins over the period; its CSV alike.
    today = time.strftime("%Y-%m-%d", time.gmtime())
    html = get(panel, f"/panel/audit?period=yesterday&from={today}&to={today}", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == len(audit_entries(db))
    assert f'value="{today}"' in html and f"from={today}" in html  # Kept by the form and its links.
    html = get(panel, f"/panel/audit?to={today[:8]}01&from={today[:8]}01", admin)[2]
    assert len(re.findall(r'<td class="when">', html)) == (
        len(audit_entries(db)) if today.endswith("01") else 0
    )
    assert get(panel, "/panel/audit?from=tomorrow", admin)[0] == 400
    status, _, text = get(panel, f"/panel/audit.csv?from={today}", admin)
    assert status == 200 and len(text.strip().splitlines()) > len(audit_entries(db))

    old_rows = system.AUDIT_PAGE_ROWS
    system.AUDIT_PAGE_ROWS = 3
    try:
        html = get(panel, "/panel/audit?entity=campaign", admin)[2]
        assert 'rel="next"' not in html  # Its creation and the rename: one page.
        html = get(panel, "/panel/audit", admin)[2]
        older = re.search(r'<a href="\?([^"]+)" rel="next">', html).group(1).replace("&amp;", "&")
        first = re.findall(r'<td class="when">', html)
        second = get(panel, "/panel/audit?" + older, admin)[2]
        assert len(first) == 3 and "Newest" in second and "bert</td>" not in second
    finally:
        system.AUDIT_PAGE_ROWS = old_rows


def test_the_audit_log_sorts_by_two_of_its_columns_pages_steadily_and_downloads_as_shown(panel, users, db):
    import csv
    import io

    from models.accounts.principal import user_principal
    from models.admin.services import create_campaign, update_campaign
    from routes.panel import system

    create_campaign(db, "First", "first", offer_url="https://o.example/")
    update_campaign(
        db, "first", name="Renamed", actor=user_principal(users["bert"].id, "bert", "buyer", False)
    )
    update_campaign(db, "first", name="Again", actor=user_principal(users["anna"].id, "Anna", "admin", False))
    admin = log_in(panel, "anna")
    entries = audit_entries(db)

    def shown(html: str) -> list[tuple[str, str, str]]:
        return re.findall(r'<td class="when">.*?</td>\s*<td>(.*?)</td>\s*<td>(\w+) <a[^>]*>(\w+)', html, re.S)

    def what(entry) -> tuple[str, str, str]:
        return (entry.actor, entry.action, entry.entity)

    # Who A to Z (case-blind), then newest first; what (action, then entity and id), equal ones newest first.
    by_who = sorted(entries, key=lambda e: (e.actor.lower(), e.actor, -e.created_at, -e.id))
    assert shown(get(panel, "/panel/audit?sort=who,-when", admin)[2]) == [what(e) for e in by_who]
    by_what = sorted(entries, key=lambda e: (e.action, e.entity, e.entity_id or 0, -e.id))
    assert shown(get(panel, "/panel/audit?sort=what", admin)[2]) == [what(e) for e in by_what]
    html = get(panel, "/panel/audit?entity=campaign&sort=-what", admin)[2]
    assert [action for _, action, _ in shown(html)] == ["update", "update", "create"]
    # A header click makes its column the first key, the first so far the second; the filters stay.
    assert 'href="?period=all_time&amp;entity=campaign&amp;sort=who,-what" class="sort"' in html
    assert 'aria-sort="descending"><a href="?period=all_time&amp;entity=campaign&amp;sort=what"' in html
    assert 'name="sort" value="-what"' in html  # The filter form keeps the sort.
    for bad in ("sort=changes", "sort=who,who", "sort=who&page=0", "sort=who&page=x", "sort=who&below=-1"):
        assert get(panel, f"/panel/audit?{bad}", admin)[0] == 400, bad

    old_rows = system.AUDIT_PAGE_ROWS
    system.AUDIT_PAGE_ROWS = 3
    try:
        html = get(panel, "/panel/audit?sort=who,-when", admin)[2]
        assert shown(html) == [what(e) for e in by_who[:3]]
        older = re.search(r'<a href="\?([^"]+)" rel="next">', html).group(1).replace("&amp;", "&")
        # An entry added meanwhile (by "aaron": it would sort first) pushes nothing onto the next page.
        update_campaign(db, "first", name="Later", actor=user_principal(None, "aaron", "admin", False))
        second = get(panel, "/panel/audit?" + older, admin)[2]
        assert shown(second) == [what(e) for e in by_who[3:6]] and "Newest" in second
    finally:
        system.AUDIT_PAGE_ROWS = old_rows

    # The CSV: every entry in the page's order (a line per changed field).
    html = get(panel, "/panel/audit?sort=who,-when", admin)[2]
    csv_path = (
        re.search(r'href="(/panel/audit.csv[^"]*)" id="audit-csv"', html).group(1).replace("&amp;", "&")
    )
    assert csv_path == "/panel/audit.csv?period=all_time&sort=who,-when"
    lines = list(csv.DictReader(io.StringIO(get(panel, csv_path, admin)[2])))
    ids = [(line["Who"], line["Action"], line["Entity"], line["Entity id"]) for line in lines]
    ids = [line for index, line in enumerate(ids) if index == 0 or ids[index - 1] != line]
    expected = sorted(audit_entries(db), key=lambda e: (e.actor.lower(), e.actor, -e.created_at, -e.id))
    assert [line[:3] for line in ids] == [what(e) for e in expected]


# -- /panel/status -----------------------------------------------------------------------------


def test_the_status_page_is_admins_only_and_masks_secrets(make_panel, users, db):
    panel = make_panel(
        LANNER_MAXMIND_LICENSE_KEY="very-secret-licence",
        LANNER_GEO_UPDATE_URL="https://me:hunter22@geo.example/",
        LANNER_MAXMIND_ACCOUNT_ID='"><img src=x onerror=alert(1)>',
    )
    from models.conversions.postbacks import read_secret

    for name in ("bert", "vera"):
        assert get(panel, "/panel/status", log_in(panel, name))[0] == 403
    status, _, html = get(panel, "/panel/status", log_in(panel, "anna"))
    assert status == 200
    for shown in (
        "Spool depth",
        "Flusher lag",
        "Consumer",
        "LANNER_MAXMIND_LICENSE_KEY",
        "(set)",
        "Deferred",
        "Bot ranges",
        "https://me:***@geo.example<",
        "no flusher heartbeat",
    ):
        assert shown in html, shown
    assert "<img src=x" not in html and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    for secret in (
        "very-secret-licence",
        "hunter22",
        read_secret(db, "postback_key"),
        read_secret(db, "api_key"),
    ):
        assert secret not in html


# -- migration 0010 ----------------------------------------------------------------------------


def test_0010_upgrades_an_install_from_0009_with_its_users_and_sessions(settings, env):
    from app import create_admin_app
    from models.accounts.passwords import hash_password
    from models.accounts.users import get_user
    from models.migrations.runner import migrate, schema_is_current
    from models.store.database import db as database
    from models.store.database import open_database
    from settings import load_settings

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0009_panel_sessions")
        database.execute_sql(
            "INSERT INTO app_user (name, role, password_hash, hides_money, created_at, updated_at) "
            "VALUES ('anna', 'admin', ?, 0, 5, 6), ('bert', 'buyer', ?, 1, 7, 8)",
            (hash_password(PASSWORD), hash_password(PASSWORD)),
        )
        assert migrate(database)[:1] == ["0010_user_timezone"] and schema_is_current(database)
        bert = get_user(database, "bert")
        assert (bert.role, bert.hides_money, bert.timezone, bert.last_login_at, bert.created_at) == (
            "buyer",
            True,
            "",
            None,
            7,
        )
        panel = InProcessApp(create_admin_app(load_settings(env), db=database), Clock(time.time()))
        cookie = log_in(panel, "bert")
        assert 'class="tz">UTC<' in get(panel, "/panel", cookie)[2]
        assert get_user(database, "bert").last_login_at is not None
    finally:
        database.close()


def test_the_session_cookie_lives_until_the_browser_closes_and_logout_clears_it(panel, users):
    status, headers, _ = post(panel, "/panel/login", {"name": "anna", "password": PASSWORD})
    assert "max-age" not in headers["set-cookie"].lower() and "expires" not in headers["set-cookie"].lower()
    cookie = headers["set-cookie"].split(";")[0]
    token = csrf_token(get(panel, "/panel/account", cookie)[2])
    status, headers, _ = post(panel, "/panel/logout", {"csrf_token": token}, cookie=cookie)
    cleared = headers["set-cookie"].lower()
    assert status == 303 and cleared.startswith('lanner_session="";') and "path=/" in cleared
    # Long past on any browser's clock, not a second before the server's (Falcon's unset_cookie).
    assert "expires=thu, 01 jan 1970 00:00:00 gmt" in cleared and "httponly" in cleared
    assert get(panel, "/panel/account", cookie)[0] == 303
