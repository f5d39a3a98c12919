"""/lanner.js in a real headless Chromium: a remote lander on another origin (a tiny local HTTP server on a
port the kernel picked) includes the script from a real `lanner serve`; the visit is recorded once, the
offer links point at /lp/click?subid=..., `window.lanner.subid` is set, and a reload or a second visit
within debounce records nothing new."""

from __future__ import annotations

import functools
import http.server
import threading
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import browser_required

pytestmark = browser_required

LANDER = """<!doctype html><html><head><meta charset="utf-8"><title>Lander</title></head><body>
<h1>Our product</h1>
<a id="offer" href="{{offer}}">Buy now</a>
<a id="marked" data-lanner-offer href="#buy">Or here</a>
<a id="other" href="https://other.example/">Elsewhere</a>
<script src="http://127.0.0.1:{port}/lanner.js" data-campaign="kc" async></script>
</body></html>"""


@pytest.fixture
def lander_site(tmp_path):
    """Serve `tmp_path/site` on 127.0.0.1:<port 0>: another origin than the tracker's."""
    site = tmp_path / "site"
    site.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield site, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def clicks(db) -> list[tuple]:
    cursor = db.connection().execute("SELECT subid, sub_id_1, referrer FROM click ORDER BY id")
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def ready_subid(browser) -> str:
    """window.lanner.ready's subid (the promise resolved once the visit is recorded)."""
    return browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const wait = () => window.lanner"
        " ? window.lanner.ready.then(l => done(l.subid)) : setTimeout(wait, 20);"
        "wait();"
    )


def test_a_remote_lander_records_one_click_and_points_its_offer_links_at_the_tracker(
    browser, start_server, lanner, lander_site, db
):
    from selenium.webdriver.common.by import By

    lanner("campaign", "create", "Direct", "--alias", "kc", "--offer-url", "https://offer.example/?c={subid}")
    server = start_server(workers=1, LANNER_DEBOUNCE_SECONDS="3600")
    site, origin = lander_site
    (site / "lander.html").write_text(LANDER.format(port=server.port))
    (site / "came.html").write_text(LANDER.format(port=server.port))
    tracker = f"http://127.0.0.1:{server.port}"
    browser.set_script_timeout(60)

    browser.get(origin + "/lander.html?sub1=zone-a&utm_source=push")
    subid = ready_subid(browser)
    assert subid and browser.execute_script("return window.lanner.subid") == subid
    click_url = f"{tracker}/lp/click?subid={subid}"
    assert browser.find_element(By.ID, "offer").get_attribute("href") == click_url
    assert browser.find_element(By.ID, "marked").get_attribute("href") == click_url
    assert browser.find_element(By.ID, "other").get_attribute("href") == "https://other.example/"
    assert not browser.get_cookies()  # Nothing but the lander's own localStorage.
    lanner("spool", "flush")
    assert clicks(db) == [(subid, "zone-a", "")]

    browser.refresh()  # The same visit: the stored subid, no request.
    assert ready_subid(browser) == subid
    browser.get(origin + "/lander.html?sub1=zone-a&utm_source=push")  # A new navigation: debounced.
    assert ready_subid(browser) == subid
    assert browser.find_element(By.ID, "offer").get_attribute("href") == click_url
    lanner("spool", "flush")
    assert clicks(db) == [(subid, "zone-a", "")]

    # Traffic that came through the campaign URL carries its subid: the script records nothing.
    browser.get(origin + "/came.html?subid=abc123")
    assert ready_subid(browser) == "abc123"
    href = browser.find_element(By.ID, "offer").get_attribute("href")
    assert parse_qs(urlsplit(href).query) == {"subid": ["abc123"]} and href.startswith(tracker + "/lp/click?")
    lanner("spool", "flush")
    assert len(clicks(db)) == 1


def test_an_unknown_campaign_leaves_the_page_as_it_is_and_still_resolves(
    browser, start_server, lander_site, db
):
    from selenium.webdriver.common.by import By

    server = start_server(workers=1)
    site, origin = lander_site
    (site / "lander.html").write_text(LANDER.format(port=server.port).replace('"kc"', '"nope"'))
    browser.set_script_timeout(60)
    browser.get(origin + "/lander.html?sub1=x")
    assert ready_subid(browser) is None
    assert browser.find_element(By.ID, "offer").get_attribute("href") == origin + "/%7Boffer%7D"
    assert clicks(db) == []
