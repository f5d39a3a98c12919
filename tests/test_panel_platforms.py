"""The panel's ad platform pages (/panel/platforms) in process, with a local fake of the platforms:
create, the connection's page with its credentials masked, change, pause / resume, a test event with the
platform's answer, the event log, admins only, CSRF and escaping."""

from __future__ import annotations

import html as markup
import re

import pytest
from platform_fakes import META_PIXEL, META_TOKEN, PlatformFake
from test_panel import csrf_token, get, log_in, make_panel, post, users  # noqa: F401

NEW = {
    "name": "fb main",
    "platform": "meta",
    "scope": "campaign:demo",
    "pixel_id": META_PIXEL,
    "access_token": META_TOKEN,
    "events": "lead=Lead, sale=Purchase",
    "test_event_code": "TEST77",
}


@pytest.fixture
def fake():
    server = PlatformFake()
    yield server
    server.close()


@pytest.fixture
def panel(make_panel, db, fake):  # noqa: F811
    from models.admin.services import create_campaign

    create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}")
    return make_panel(LANNER_META_API_URL=fake.base)


def test_an_admin_creates_a_connection_sees_it_masked_tests_pauses_and_reads_its_log(panel, users, db, fake):  # noqa: F811
    from models.accounts.audit import list_audit

    cookie = log_in(panel)
    setup = get(panel, "/panel/postbacks", cookie)[2]
    assert 'href="/panel/platforms"' in setup
    listing = get(panel, "/panel/platforms", cookie)[2]
    assert "No connections yet." in listing
    status, headers, _ = post(
        panel, "/panel/platforms", NEW | {"csrf_token": csrf_token(listing)}, cookie=cookie
    )
    assert status == 303 and headers["location"] == "/panel/platforms/1?done=created"

    page = get(panel, headers["location"], cookie)[2]
    assert "Connection created" in page
    assert META_TOKEN not in page and "****" + META_TOKEN[-4:] in page
    assert f'id="credential-pixel_id">{META_PIXEL}<' in page
    assert "No events yet." in page
    assert [entry.actor for entry in list_audit(db, entity="platform_connection")] == ["anna"]
    assert "fb main" in get(panel, "/panel/platforms", cookie)[2]

    token = csrf_token(page)
    status, headers, _ = post(panel, "/panel/platforms/1", {"do": "test", "csrf_token": token}, cookie=cookie)
    assert status == 303
    flash = headers["set-cookie"].split(";")[0]
    tested = get(panel, "/panel/platforms/1", f"{cookie}; {flash}")[2]
    assert "Test event accepted" in tested and "events_received 1" in tested
    (event,) = fake.events("meta").values()
    assert event["test"] == "TEST77"

    status, headers, _ = post(
        panel, "/panel/platforms/1", {"do": "pause", "csrf_token": token}, cookie=cookie
    )
    assert status == 303 and headers["location"].endswith("done=paused")
    assert 'id="platform-status">paused<' in get(panel, "/panel/platforms/1", cookie)[2]
    post(panel, "/panel/platforms/1", {"do": "resume", "csrf_token": token}, cookie=cookie)
    save = {
        "do": "save",
        "csrf_token": token,
        "events": "sale=Purchase",
        "test_event_code": "",
        "access_token": "",
    }
    status, headers, _ = post(panel, "/panel/platforms/1", save, cookie=cookie)
    assert status == 303 and headers["location"].endswith("done=saved")
    page = get(panel, "/panel/platforms/1", cookie)[2]
    assert 'id="platform-status">active<' in page and "none: live events" in page
    assert "****" + META_TOKEN[-4:] in page  # An empty secret field kept the token.
    status, headers, _ = post(
        panel, "/panel/platforms/1", {"do": "remove", "csrf_token": token}, cookie=cookie
    )
    assert status == 303 and headers["location"].endswith("done=removed")
    page = get(panel, "/panel/platforms/1", cookie)[2]
    assert 'id="platform-status">removed<' in page and 'id="test-platform"' not in page


def test_a_refused_connection_keeps_what_was_typed_but_no_secret_and_says_why(panel, users, db):  # noqa: F811
    from models.conversions.platforms.connections import list_connections

    cookie = log_in(panel)
    token = csrf_token(get(panel, "/panel/platforms", cookie)[2])
    for fields, sentence in (
        ({"scope": ""}, "one campaign or one traffic source"),
        ({"events": "trash=Spam"}, "never sent"),
        ({"pixel_id": ""}, "needs its pixel_id"),
        ({"platform": "friendster"}, "platform must be one of"),
    ):
        status, _, body = post(panel, "/panel/platforms", NEW | fields | {"csrf_token": token}, cookie=cookie)
        page = body.decode()
        assert status == 400 and 'role="alert"' in page and sentence in page, (fields, page[-1500:])
        assert META_TOKEN not in page
        assert 'value="fb main"' in page
    assert list_connections(db) == []


def test_only_an_admin_reaches_the_pages_and_writes_need_the_token(panel, users, db):  # noqa: F811
    from models.conversions.platforms.connections import create_connection

    create_connection(
        db, "fb", "meta", campaign="demo", credentials={"pixel_id": META_PIXEL, "access_token": META_TOKEN}
    )
    for name in ("bert", "vera"):
        cookie = log_in(panel, name)
        assert get(panel, "/panel/platforms", cookie)[0] == 403
        assert get(panel, "/panel/platforms/1", cookie)[0] == 403
        assert 'href="/panel/platforms"' not in get(panel, "/panel/postbacks", cookie)[2]
    cookie = log_in(panel)
    assert post(panel, "/panel/platforms/1", {"do": "pause"}, cookie=cookie)[0] == 403  # No CSRF token.
    assert get(panel, "/panel/platforms/99", cookie)[0] == 404


def test_names_and_answers_are_escaped(panel, users, db, fake):  # noqa: F811
    from platform_fakes import Scripted

    cookie = log_in(panel)
    token = csrf_token(get(panel, "/panel/platforms", cookie)[2])
    name = "<script>alert(1)</script>"
    status, headers, _ = post(
        panel, "/panel/platforms", NEW | {"name": name, "csrf_token": token}, cookie=cookie
    )
    assert status == 303
    fake.script(Scripted(500, b'{"error": {"message": "<img src=x onerror=alert(2)>", "code": 1}}'))
    status, headers, _ = post(panel, "/panel/platforms/1", {"do": "test", "csrf_token": token}, cookie=cookie)
    flash = headers["set-cookie"].split(";")[0]
    page = get(panel, "/panel/platforms/1", f"{cookie}; {flash}")[2]
    assert "<script>alert(1)" not in page and markup.escape(name) in page
    assert "<img src=x" not in page and "Test event refused" in page
    assert re.search(r"&lt;img src=x onerror=alert\(2\)&gt;", page)
