"""The campaign URL over a real SQLite file and spool, in two tiers.

In-process (`app_client`/`start_app`: create_worker_app() here, no socket): what the handler and the
tracker answer and store, and clicks for a real consumer to land. A real `lanner serve`
(`server`/`start_server`: master, bjoern workers): one click round trip with a UTF-8 User-Agent on the
wire, the client address from the socket, raw malformed HTTP, concurrent clients while the database is
locked, a Huey consumer landing what the workers spooled, a killed worker.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, raw_request, request, run_lanner, subid_of, wait_until

OFFER = "https://offer.example/lp?click={subid}&cid={campaign_id}&cn={campaign_name}&s1={sub_id_1}&s2={sub_id_2}&src={source}&ext={external_id}&cost={cost}&ip={ip}&ua={user_agent}"


@pytest.fixture
def campaign(db):
    """Campaign `summer`, made by the service the CLI calls (no CLI process a test: the clicks are the
    subject)."""
    from models.admin.services import create_campaign

    create_campaign(db, "Summer Sale", "summer", offer_url=OFFER)
    return "summer"


def flush(lanner) -> str:
    return lanner("spool", "flush").stdout


def rows(settings, where: str = "1 = 1", params=()) -> list[dict]:
    """The stored clicks as {column: value}, read on this test's own connection (either backend)."""
    from models.store.database import db

    cursor = db.connection().execute(f"SELECT * FROM click WHERE {where} ORDER BY id", params)
    try:
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def test_click_redirects_with_macros_and_is_stored(campaign, server, lanner, settings):
    status, headers, _ = click(
        server.port,
        campaign,
        "sub1=zone%2042&sub_id_2=a%26b&source=push&external_id=ext-1&cost=0.015",
        ip="203.0.113.9",
        ua="Mozilla/5.0 Ünïcode",
    )
    assert status == 302
    assert headers["cache-control"] == "no-store"
    location = urlsplit(headers["location"])
    assert location.netloc == "offer.example"
    query = parse_qs(location.query)
    assert query["s1"] == ["zone 42"] and query["s2"] == ["a&b"] and query["cn"] == ["Summer Sale"]
    assert query["src"] == ["push"] and query["ext"] == ["ext-1"] and query["cost"] == ["0.015"]
    assert query["ip"] == ["203.0.113.9"] and query["ua"] == ["Mozilla/5.0 Ünïcode"]
    assert "Summer%20Sale" in headers["location"]  # Values are percent-encoded, not form-encoded.
    flush(lanner)
    (row,) = rows(settings)
    assert row["subid"] == query["click"][0] and str(row["campaign_id"]) == query["cid"][0]
    assert (row["ip"], row["user_agent"], row["sub_id_1"], row["sub_id_2"]) == (
        "203.0.113.9",
        "Mozilla/5.0 Ünïcode",
        "zone 42",
        "a&b",
    )
    assert (row["source"], row["external_id"], row["cost"]) == ("push", "ext-1", 0.015)
    assert row["stream_id"] is not None and row["offer_id"] is not None
    assert abs(row["created_at"] / 1000 - time.time()) < 60
    assert (row["is_unique_global"], row["is_unique_campaign"], row["is_unique_stream"]) == (1, 1, 1)
    import zlib

    assert row["ua_hash"] == zlib.crc32("Mozilla/5.0 Ünïcode".encode())


def test_location_is_not_encoded_twice(lanner, app_client):
    # A literal '|' in the template once made Falcon's resp.location re-encode every '%'.
    lanner(
        "campaign",
        "create",
        "Pipe",
        "--alias",
        "pipe",
        "--offer-url",
        "https://offer.example/a|b?s1={sub_id_1}",
    )
    app_client.clock.advance(1.2)  # Workers pick up configuration changes within a second.
    status, headers, _ = click(app_client, "pipe", "sub1=zone%2042%25")
    assert (status, headers["location"]) == (302, "https://offer.example/a|b?s1=zone%2042%25")


def test_unknown_alias_is_404_and_archived_campaign_too(campaign, app_client, lanner):
    assert request(app_client, "/no-such-campaign")[0] == 404
    assert click(app_client, campaign)[0] == 302  # Loaded before the archive.
    lanner("campaign", "archive", campaign)
    app_client.clock.advance(1.0)  # Workers pick up configuration changes within a second.
    assert click(app_client, campaign, ua="after archive")[0] == 404


def test_unknown_alias_goes_to_configured_fallback(start_app, campaign):
    app = start_app(LANNER_FALLBACK_URL="https://fallback.example/")
    status, headers, _ = request(app, "/missing")
    assert (status, headers["location"]) == (302, "https://fallback.example/")


def test_a_trusted_proxy_may_be_a_cidr_network(start_server, campaign, lanner, settings):
    # An exact-string match never trusted a network: every click was stored with the proxy's address.
    live = start_server(LANNER_TRUSTED_PROXIES="127.0.0.0/8")
    assert click(live.port, campaign, ip="203.0.113.9")[0] == 302
    flush(lanner)
    assert [row["ip"] for row in rows(settings)] == ["203.0.113.9"]


EDGE_CASES = [
    # (peer, X-Real-IP, X-Forwarded-Proto, Host) -> (ip, is_https, domain, host)
    (
        ("127.0.0.5", "203.0.113.9", "https", "Tracker.Example:8443"),
        ("203.0.113.9", True, "tracker.example", "Tracker.Example:8443"),
    ),
    (
        ("198.51.100.7", "203.0.113.9", "https", "Tracker.Example:8443"),
        ("198.51.100.7", False, "tracker.example", "Tracker.Example:8443"),
    ),
    (
        ("127.0.0.5", "not-an-ip", "http", "[2001:DB8::1]:80"),
        ("127.0.0.5", False, "[2001:db8::1]", "[2001:DB8::1]:80"),
    ),
    (("198.51.100.7", "", "", "bad host<script>"), ("198.51.100.7", False, "", "")),
    (
        ("127.0.0.6", "2001:db8:0:0::9", "HTTPS ", "x.example"),
        ("2001:db8::9", True, "x.example", "x.example"),
    ),
    (("10.0.0.1", "", "", "y.example"), ("10.0.0.1", False, "y.example", "y.example")),
]


def test_the_edge_answers_a_peer_and_a_host_alike_every_time_past_its_caches_bound(monkeypatch):
    # A worker keeps the trusted-proxy answer per peer and the domain per Host: a value asked again, or
    # after the cache was emptied, gets the answer it got the first time.
    from routes import click as edge

    monkeypatch.setattr(edge, "MAX_CACHED_VALUES", 4)  # Fewer than the cases: emptied as it goes.
    address = edge.ClientAddress(("127.0.0.0/8",), "X-Real-IP", is_unix_socket=False)
    parser = edge.VisitParser(address, {}, 100.0)
    for _ in range(3):
        for (peer, real_ip, proto, host), expected in EDGE_CASES:
            environ = {"REMOTE_ADDR": peer, "HTTP_HOST": host, "wsgi.url_scheme": "http"}
            if real_ip:
                environ["HTTP_X_REAL_IP"] = real_ip
            if proto:
                environ["HTTP_X_FORWARDED_PROTO"] = proto
            visit = parser(environ)
            assert (visit.ip, visit.is_https, visit.domain, visit.host) == expected
            assert len(address._peers) <= 4 and len(parser._hosts) <= 4


def test_the_edge_reads_headers_as_the_utf8_text_the_client_sent():
    from routes.click import _text

    sent = "Mozilla/5.0 (Linux; Android 14; Pixel 8) ÿ Ж 表"
    tunneled = sent.encode("utf-8").decode("latin-1")  # What the WSGI server hands over.
    assert _text(tunneled, 1000) == sent
    assert _text("Mozilla/5.0 ascii", 7) == "Mozilla"
    assert _text("\xff\xfe bad utf8", 100) == "\ufffd\ufffd bad utf8"
    assert _text("", 100) == ""


def test_a_malformed_trusted_proxy_is_refused_at_start_naming_it(lanner, env):
    result = run_lanner({**env, "LANNER_TRUSTED_PROXIES": "10.0.0.1/8"}, "serve", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "LANNER_TRUSTED_PROXIES='10.0.0.1/8' is invalid" in result.stderr
    assert "did you mean 10.0.0.0/8?" in result.stderr


BAD_REQUESTS = [
    b"GET /summer?sub1=%ff%fe%fd&sub2=%&sub3=%zz&&&=&sub4==x HTTP/1.1\r\n"
    b"Host: x\r\nUser-Agent: \xff\xfe bad utf8\r\n\r\n",
    b"GET /summer?sub1=' OR 1=1; DROP TABLE click;-- HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /summer?" + b"a=b&" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /summer HTTP/1.1\r\nHost: x\r\nUser-Agent: "
    + b"A" * 20000
    + b"\r\nReferer: "
    + b"\xc3" * 5000
    + b"\r\n\r\n",
    b"GET /%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /summer?sub1=x%0d%0aSet-Cookie:%20a=b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /summer HTTP/1.1\r\nHost: x\r\nX-Real-IP: not-an-ip\r\n\r\n",
    b"GET /summer?cost=nan&cost=-5 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GARBAGE\r\n\r\n",
]


def test_malformed_requests_never_get_a_500(campaign, server):
    # One server takes them all, one after the other: each answer is checked, and the worker survives each.
    for number, raw in enumerate(BAD_REQUESTS):
        answer = raw_request(server.port, raw)
        status_line = answer.split(b"\r\n", 1)[0]
        assert not status_line.startswith(b"HTTP/1.1 5"), (number, answer[:300])
        if status_line.startswith(b"HTTP/1.1 302"):
            lines = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
            assert not any(line.lower().startswith(b"set-cookie") for line in lines), number
            location = [line for line in lines if line.lower().startswith(b"location:")][0]
            assert urlsplit(location.split(b":", 1)[1].strip().decode()).netloc == "offer.example", number
        assert request(server.port, "/healthz")[0] == 200, number  # And the worker is still there.


def test_malicious_input_is_stored_as_text(campaign, app_client, lanner, settings):
    status, headers, _ = click(app_client, campaign, "sub1=%27%20OR%201%3D1%3B%20DROP%20TABLE%20click%3B--")
    assert status == 302
    flush(lanner)
    assert rows(settings)[0]["sub_id_1"] == "' OR 1=1; DROP TABLE click;--"


def test_same_ip_different_uas_get_distinct_stored_subids(campaign, app_client, lanner, settings):
    subids = [
        subid_of(click(app_client, campaign, ip="198.51.100.50", ua=f"Phone {n}")[1]["location"])
        for n in range(5)
    ]
    assert len(set(subids)) == 5
    flush(lanner)
    assert sorted(row["subid"] for row in rows(settings)) == sorted(subids)


def test_repeat_within_two_seconds_reuses_subid_and_after_three_stores_again(
    campaign, app_client, lanner, settings
):
    first = click(app_client, campaign, "sub1=a", ip="198.51.100.60", ua="Same UA")[1]["location"]
    again = click(app_client, campaign, "sub1=a", ip="198.51.100.60", ua="Same UA")[1]["location"]
    assert again == first
    app_client.clock.advance(3)
    later = click(app_client, campaign, "sub1=a", ip="198.51.100.60", ua="Same UA")[1]["location"]
    assert subid_of(later) != subid_of(first)
    flush(lanner)
    stored = rows(settings, "ip = ?", ("198.51.100.60",))
    assert [row["subid"] for row in stored] == [subid_of(first), subid_of(later)]
    assert [row["is_unique_campaign"] for row in stored] == [1, 0]


def test_uniqueness_window_boundary_through_the_app(start_app, lanner, settings):
    # A 3.6 s window (0.001 h) and 0.5 s debounce so the boundary is crossed within the test.
    app = start_app(LANNER_UNIQUENESS_HOURS="0.001", LANNER_DEBOUNCE_SECONDS="0.5")
    lanner("campaign", "create", "A", "--alias", "a", "--offer-url", OFFER, "--uniqueness-hours", "0.001")
    lanner("campaign", "create", "B", "--alias", "b", "--offer-url", OFFER, "--uniqueness-hours", "0.001")
    app.clock.advance(1.2)  # Let the workers load the new campaigns.
    visitor = {"ip": "192.0.2.10", "ua": "Boundary UA"}
    sequence = [("a", 0), ("a", 1.0), ("b", 0), ("a", 4.0), ("b", 0), ("b", 1.0)]
    subids = []
    for n, (alias, pause) in enumerate(sequence):
        app.clock.advance(pause)
        if n == 3:
            flush(lanner)  # The next probes must find earlier clicks in the database as well.
        subids.append(subid_of(click(app, alias, **visitor)[1]["location"]))
    flush(lanner)
    stored = {row["subid"]: row for row in rows(settings)}
    flags = [
        (stored[s]["is_unique_global"], stored[s]["is_unique_campaign"], stored[s]["is_unique_stream"])
        for s in subids
    ]
    # Past 3.6 s everything is unique again; campaign b's own window ran out too (4 s since its click).
    assert flags == [(1, 1, 1), (0, 0, 0), (0, 1, 1), (1, 1, 1), (0, 1, 1), (0, 0, 0)]


@pytest.mark.sqlite_only  # SQLite's file lock (BEGIN EXCLUSIVE) held by another connection.
def test_clicks_get_302_while_another_connection_holds_the_write_lock(campaign, server, lanner, settings):
    blocker = sqlite3.connect(settings.database_path, timeout=0, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(
                pool.map(
                    lambda n: click(
                        server.port, campaign, ip=f"100.64.{n // 200}.{n % 200 + 1}", ua=f"UA {n}"
                    ),
                    range(240),
                )
            )
        assert all(status == 302 for status, _, _ in answers)
        subids = [subid_of(headers["location"]) for _, headers, _ in answers]
        assert len(set(subids)) == 240
        spooled = b"".join(path.read_bytes() for path in sorted(settings.spool_dir.glob("clicks.*.log")))
        assert all(subid.encode() in spooled for subid in subids)
        blocked = lanner("spool", "flush", check=False)  # The flusher must wait, not lose anything.
        assert blocked.returncode != 0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    flush(lanner)
    stored = [row["subid"] for row in rows(settings)]
    assert sorted(stored) == sorted(subids)
    flush(lanner)
    assert len(rows(settings)) == 240


def test_huey_consumer_lands_spooled_clicks_within_seconds(campaign, server, start_consumer, settings):
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.2")
    subids = {subid_of(click(server.port, campaign, ua=f"Consumer UA {n}")[1]["location"]) for n in range(50)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if {row["subid"] for row in rows(settings)} == subids:
            break
        time.sleep(0.2)
    assert {row["subid"] for row in rows(settings)} == subids, consumer.log
    # Landed segments are removed once a checkpoint made their rows durable... eventually; the
    # spool status must show nothing pending.
    assert consumer.process.poll() is None


@pytest.mark.sqlite_only  # SQLite's write lock (BEGIN IMMEDIATE) held past its busy timeout.
def test_flusher_outlasts_a_write_lock_held_past_the_busy_timeout(
    campaign, app_client, start_consumer, settings
):
    """As during a deferred index build: the clicks wait in the spool, then land without a restart."""
    import sqlite3

    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.2")
    holder = sqlite3.connect(settings.database_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        subids = {
            subid_of(click(app_client, campaign, ua=f"Locked UA {n}")[1]["location"]) for n in range(20)
        }
        # The flusher's BEGIN IMMEDIATE gives up after busy_timeout (5 s), and says so.
        wait_until(
            lambda: "database is locked; trying again" in consumer.log,
            60,
            "the flusher to give up on the lock",
            lambda: consumer.log,
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Well before the once-a-minute keep-alive would restart a broken flusher chain.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and {row["subid"] for row in rows(settings)} != subids:
        time.sleep(0.2)
    assert {row["subid"] for row in rows(settings)} == subids, consumer.log
    assert "database is locked; trying again" in consumer.log


def web_workers(master_pid: int) -> list[str]:
    """The master's web workers (not the report API's admin worker)."""
    from workers.runtime.procfs import children, process_name

    return [str(pid) for pid in children(master_pid) if process_name(pid) == "lanner-web"]


def test_killed_worker_is_replaced_and_other_workers_keep_serving(campaign, start_server, lanner, settings):
    server = start_server(workers=2)
    children = web_workers(server.process.pid)
    assert len(children) == 2
    stop = threading.Event()
    results: list[tuple[int, str]] = []

    def hammer(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                status, headers, _ = click(
                    server.port, campaign, ip=f"100.70.{n}.{i % 250 + 1}", ua=f"Kill UA {n} {i}"
                )
                results.append((status, headers.get("location", "")))
            except OSError as exc:
                results.append((0, repr(exc)))

    def replaced() -> bool:
        now = web_workers(server.process.pid)
        return len(now) == 2 and children[0] not in now

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    # The hammering lasts as long as its conditions take, not a fixed 3 s of four busy clients: both
    # workers serving, then the kill, then a replacement up and 100 more answers after the kill.
    try:
        wait_until(lambda: len(results) >= 50, 60, "clicks served before the kill", lambda: server.log)
        os.kill(int(children[0]), signal.SIGKILL)
        killed_at = len(results)
        wait_until(replaced, 60, "a replacement web worker", lambda: server.log)
        wait_until(lambda: len(results) >= killed_at + 100, 60, "clicks served after the kill")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    failures = [r for r in results if r[0] != 302]
    # Only requests in flight on the killed worker's own connections may fail (≤ 1 per client).
    assert len(failures) <= len(threads), failures[:5]
    assert len(results) > 100
    new_children = web_workers(server.process.pid)
    assert len(new_children) == 2 and children[0] not in new_children
    flush(lanner)
    stored = {row["subid"] for row in rows(settings)}
    served = {subid_of(location) for status, location in results if status == 302}
    assert served <= stored  # Every 302 that carried a subid is a stored click.
