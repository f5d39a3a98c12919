"""Routing over HTTP with a real SQLite file, in two tiers.

In-process (`start_app`: create_worker_app() here, no socket): stream order and filters, rotation, prefetch
answers, meta/JS/HTML pages (a real Huey consumer lands the clicks where a test waits for rows). A real
`lanner serve` (`start_server`: several bjoern workers): a cap held exactly under 32 concurrent clients over
4 workers, and raw hostile requests through every filter that bjoern must pass on.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from conftest import click, request


def offer_host(location: str) -> str:
    return urlsplit(location).hostname


def wait_for_rows(db, sql: str, params: tuple, expected: int, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while True:
        count = db.execute_sql(sql, params).fetchone()[0]
        if count >= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.1)


def test_stream_order_and_filters_through_the_app(lanner, start_app):
    lanner("offer", "create", "Main", "--url", "https://main.example/?c={subid}")
    lanner("offer", "create", "Push", "--url", "https://push.example/?c={subid}")
    lanner("offer", "create", "Night", "--url", "https://fallback.example/?c={subid}")
    lanner("campaign", "create", "Order", "--alias", "order", "--offer-id", "1")
    lanner("stream", "add", "order", "--type", "intercepting", "--offer", "2", "--filter", "param.src=push")
    lanner("stream", "update", "1", "--filter", "language=en")
    lanner("stream", "add", "order", "--type", "fallback", "--offer", "3")
    app = start_app()
    assert offer_host(click(app, "order", "src=push")[1]["location"]) == "push.example"
    english = request(app, "/order", {"X-Real-IP": "198.51.100.4", "Accept-Language": "en-US,en;q=0.8"})
    assert offer_host(english[1]["location"]) == "main.example"
    assert offer_host(click(app, "order", ip="198.51.100.5")[1]["location"]) == "fallback.example"


def test_unvisited_rotation_through_the_app(lanner, start_app):
    for name in ("a", "b", "c"):
        lanner("offer", "create", name, "--url", f"https://{name}.example/?c={{subid}}")
    lanner("campaign", "create", "Rotate", "--alias", "rotate", "--offer-id", "1")
    lanner(
        "stream",
        "update",
        "1",
        "--offer",
        "1",
        "--offer",
        "2",
        "--offer",
        "3",
        "--offer-rotation",
        "unvisited",
    )
    app = start_app(LANNER_DEBOUNCE_SECONDS="0")
    hosts = [offer_host(click(app, "rotate", ip="198.51.100.20")[1]["location"]) for _ in range(3)]
    assert sorted(hosts) == ["a.example", "b.example", "c.example"]


def test_concurrent_clicks_stop_at_exactly_the_cap(lanner, start_server, start_consumer, db):
    cap = 25
    lanner("offer", "create", "Capped", "--url", "https://capped.example/?c={subid}", "--total-cap", str(cap))
    lanner("offer", "create", "Spare", "--url", "https://spare.example/?c={subid}")
    lanner("campaign", "create", "Cap", "--alias", "cap", "--offer-id", "1")
    lanner("stream", "update", "1", "--fallback-offer", "2")
    server = start_server(workers=4)
    start_consumer(LANNER_FLUSH_INTERVAL="0.2")

    def one(n: int) -> str:
        status, headers, _ = click(server.port, "cap", ip=f"10.9.{n // 200}.{n % 200 + 1}")
        assert status == 302
        return offer_host(headers["location"])

    with ThreadPoolExecutor(max_workers=32) as pool:
        got = Counter(pool.map(one, range(3 * cap)))
    assert got == {"capped.example": cap, "spare.example": 2 * cap}
    stored = wait_for_rows(db, "SELECT COUNT(*) FROM click WHERE campaign_id = 1", (), 3 * cap)
    assert stored == 3 * cap
    capped_rows = db.execute_sql("SELECT COUNT(*) FROM click WHERE offer_id = 1").fetchone()[0]
    counter = db.execute_sql(
        "SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = 1"
    ).fetchone()[0]
    assert capped_rows == counter == cap


def test_prefetch_and_subresource_hits_are_not_clicks(lanner, start_app, start_consumer, db):
    lanner("campaign", "create", "Pre", "--alias", "pre", "--offer-url", "https://o.example/?c={subid}")
    app = start_app()
    start_consumer(LANNER_FLUSH_INTERVAL="0.2")
    for headers in (
        {"Sec-Purpose": "prefetch;prerender"},
        {"Purpose": "prefetch"},
        {"Sec-Fetch-Dest": "image"},
    ):
        status, answer, _ = request(app, "/pre", {"X-Real-IP": "198.51.100.30", **headers})
        assert status == 204 and "location" not in answer
    status, answer, _ = request(app, "/pre", {"X-Real-IP": "198.51.100.31", "Sec-Fetch-Dest": "document"})
    assert status == 302
    assert wait_for_rows(db, "SELECT COUNT(*) FROM click", (), 1) == 1
    time.sleep(0.5)
    assert db.execute_sql("SELECT ip FROM click").fetchall() == [("198.51.100.31",)]


def test_meta_js_and_html_answers(lanner, start_app):
    lanner(
        "campaign", "create", "Pages", "--alias", "pages", "--offer-url", "https://o.example/?a=1&c={subid}"
    )
    lanner("stream", "update", "1", "--redirect-type", "meta")
    lanner(
        "stream",
        "add",
        "pages",
        "--type",
        "intercepting",
        "--action",
        "html",
        "--html",
        "<h1>Hi</h1>",
        "--filter",
        "param.page=1",
    )
    app = start_app()
    status, headers, body = click(app, "pages")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'http-equiv="refresh" content="0;url=https://o.example/?a=1&amp;c=' in body
    lanner("stream", "update", "1", "--redirect-type", "js")
    app.clock.advance(1.2)  # Workers reload the config within a second.
    status, _, body = click(app, "pages", ip="198.51.100.40")
    assert status == 200 and b'window.location.replace("https://o.example/?a=1&c=' in body
    status, _, body = click(app, "pages", "page=1", ip="198.51.100.41")
    assert (status, body) == (200, b"<h1>Hi</h1>")


HOSTILE = [
    b"GET /guarded?keyword=%ff%fe&param=%27%20OR%201=1-- HTTP/1.1\r\nHost: x\r\n"
    b"User-Agent: \xff\xfe\xc3 Mobile\r\nAccept-Language: "
    + b"xx-YY;q=abc," * 500
    + b"\r\nReferer: \xc3\x28 http://fb.com/\r\n\r\n",
    b"GET /guarded HTTP/1.1\r\nHost: x\r\nUser-Agent: " + b"Mozilla/5.0 (iPhone " * 900 + b"\r\n\r\n",
    b"GET /guarded HTTP/1.1\r\nHost: x\r\nX-Real-IP: 2001:db8::1%eth0\r\nAccept-Language: *;q=0,\x00\r\n\r\n",
    b"GET /guarded?sub_id_3=" + b"%41" * 3000 + b" HTTP/1.1\r\nHost: x\r\nX-Real-IP: ::ffff:8.8.8.8\r\n\r\n",
    b"GET /guarded HTTP/1.1\r\nHost: x\r\nSec-Purpose: \xff prefetch\r\nSec-Fetch-Dest: \xff\r\n\r\n",
]


def test_hostile_input_through_every_filter_never_gets_a_500(lanner, start_server):
    from conftest import raw_request

    lanner(
        "campaign", "create", "Guarded", "--alias", "guarded", "--offer-url", "https://o.example/?c={subid}"
    )
    filters = [
        "country!=unknown",
        "device=mobile,tablet",
        "os!=iOS",
        "browser=Chrome",
        "language=en,de",
        "ip!=10.0.0.0/8,2001:db8::/32",
        "referrer~/fb|ig/",
        "keyword=shoes",
        "param.param~select",
        "sub_id_3~/^A+$/",
        "user_agent~/iphone/",
        "schedule=mon-sun 00:00-24:00",
        "unique=campaign",
        "bot=no",
    ]
    args = [arg for expression in filters for arg in ("--filter", expression)]
    lanner(
        "stream",
        "add",
        "guarded",
        "--type",
        "intercepting",
        "--action",
        "html",
        "--html",
        "<p>x</p>",
        "--filter-mode",
        "or",
        *args,
    )
    server = start_server()
    statuses = [raw_request(server.port, raw).split(b"\r\n", 1)[0] for raw in HOSTILE]
    # Each reached the app: the schedule filter always passes (OR), so the stream's page; the
    # last one is a prefetch (its garbage Sec-Fetch-Dest is simply not a subresource).
    assert statuses == [b"HTTP/1.1 200 OK"] * 4 + [b"HTTP/1.1 204 No Content"]
    assert request(server.port, "/healthz")[0] == 200
