"""Outbound postbacks: queued once per (conversion, target, status), sent to a real local HTTP server,
retried until it answers 2xx, given up after MAX_ATTEMPTS; end to end through `lanner serve` and the
Huey consumer; `lanner postback test`.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, free_port, request, run_lanner

# ---------------------------------------------------------------------------------------------
# A real local HTTP server standing in for the traffic source.


@dataclass
class Seen:
    method: str
    path: str  # Path and query, as requested.
    body: str
    headers: dict[str, str]


class TargetServer:
    """ThreadingHTTPServer on 127.0.0.1:0 that records every request.

    It answers `fail_code` to the first `fail_first` requests and 200 after that; with `hold_first`
    the first request is not answered until `release` is set.
    """

    def __init__(self, *, fail_first: int = 0, fail_code: int = 500, hold_first: bool = False) -> None:
        self.fail_first = fail_first
        self.fail_code = fail_code
        self.hold_first = hold_first
        self.requests: list[Seen] = []
        self.lock = threading.Lock()
        self.first_arrived = threading.Event()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                seen = Seen(self.command, self.path, body, {k.lower(): v for k, v in self.headers.items()})
                with owner.lock:
                    number = len(owner.requests)
                    owner.requests.append(seen)
                if number == 0:
                    owner.first_arrived.set()
                    if owner.hold_first:
                        owner.release.wait(20)
                code = owner.fail_code if number < owner.fail_first else 200
                payload = b"ok" if code == 200 else b"no"
                self.send_response(code)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = handle_one

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.daemon = True
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def seen(self) -> list[Seen]:
        with self.lock:
            return list(self.requests)

    def wait_for(self, count: int, deadline_seconds: float = 20) -> list[Seen]:
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            seen = self.seen()
            if len(seen) >= count:
                return seen
            time.sleep(0.02)
        raise AssertionError(f"the target got {len(self.seen())} request(s), expected {count}: {self.seen()}")

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def target_server():
    servers: list[TargetServer] = []

    def start(**options) -> TargetServer:
        server = TargetServer(**options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# ---------------------------------------------------------------------------------------------
# Library level: a campaign, a click row, postbacks recorded in-process.


@pytest.fixture
def campaign(db):
    from models.admin.services import create_campaign

    return create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}")


@pytest.fixture
def make_click(db, campaign, clock):
    from models.clicks.record import new_subid
    from models.tables.click import Click

    def make(**columns) -> str:
        subid = new_subid()
        user_agent = "Mozilla/5.0 test"
        Click.create(
            subid=subid,
            created_at=int(clock() * 1000),
            campaign_id=campaign.id,
            stream_id=None,
            offer_id=None,
            ip="203.0.113.7",
            user_agent=user_agent,
            ua_hash=zlib.crc32(user_agent.encode()),
            **columns,
        )
        return subid

    return make


@pytest.fixture
def postback(db, clock):
    """Record one incoming postback (the parameters a network would send); returns its Outcome."""
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback

    recorder = ConversionRecorder(db, park_ms=3_600_000, clock=clock)

    def send(**params: str):
        return recorder.record(parse_postback(params), Received("GET", "127.0.0.1", "test"))

    return send


def delivery_row(delivery_id: int) -> dict:
    from models.tables.conversion import PostbackDelivery

    return PostbackDelivery.select().where(PostbackDelivery.id == delivery_id).dicts().get()


def all_deliveries() -> list[dict]:
    from models.tables.conversion import PostbackDelivery

    return list(PostbackDelivery.select().order_by(PostbackDelivery.id).dicts())


def test_a_sale_is_sent_once_to_the_rendered_url_with_macros_percent_encoded(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery

    target = target_server()
    template = (
        target.base
        + "/cb/{subid}?st={status}&p={payout}&r={revenue}&cur={currency}&t={tid}&cv={conversion_id}"
        + "&s1={sub_id_1}&ip={ip}"
    )
    add_target(db, "demo", template, ["sale"])
    subid = make_click(sub_id_1="zone 42&x/ü")

    outcome = postback(subid=subid, status="sale", payout="2.5", tid="abc 1/2")
    assert outcome.verdict == "created"
    assert len(outcome.deliveries) == 1
    (delivery_id,) = outcome.deliveries
    assert delivery_row(delivery_id)["state"] == "pending"

    result = send_delivery(db, delivery_id, retry_base=30, clock=clock)

    path = (
        f"/cb/{subid}?st=sale&p=2.5&r=2.5&cur=USD&t=abc%201%2F2&cv={outcome.conversion_id}"
        "&s1=zone%2042%26x%2F%C3%BC&ip=203.0.113.7"
    )
    (seen,) = target.seen()
    assert (seen.method, seen.path, seen.body) == ("GET", path, "")
    assert seen.headers["user-agent"] == "Lanner-Postback/1.0"
    assert (result.state, result.url, result.response_code) == ("sent", target.base + path, 200)
    assert result.error == ""
    row = delivery_row(delivery_id)
    assert (row["state"], row["response_code"], row["attempts"], row["url"], row["error"]) == (
        "sent",
        200,
        1,
        target.base + path,
        "",
    )

    # Sent is final: another attempt (even once any lease is long over) sends nothing.
    clock.advance(3600)
    again = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert (again.state, again.response_code) == ("sent", None)  # Its state, with no new answer.
    assert len(target.seen()) == 1
    assert delivery_row(delivery_id) == row


def test_deliveries_are_queued_once_per_conversion_target_and_status(db, campaign, make_click, postback):
    from models.conversions.admin import add_target

    sale_only = add_target(db, "demo", "http://127.0.0.1:9/sale?s={subid}", ["sale"])
    lead_and_sale = add_target(db, "demo", "http://127.0.0.1:9/both?s={subid}", ["lead", "sale"])
    subid = make_click()

    lead = postback(subid=subid, status="lead")
    assert lead.verdict == "created"
    assert [(d["target_id"], d["status"]) for d in map(delivery_row, lead.deliveries)] == [
        (lead_and_sale.id, "lead")
    ]  # Nothing for the sale-only target.

    sale = postback(subid=subid, status="sale", payout="3", tid="t-1")
    assert sale.verdict == "updated" and sale.conversion_id == lead.conversion_id
    assert sorted((d["target_id"], d["status"]) for d in map(delivery_row, sale.deliveries)) == [
        (sale_only.id, "sale"),
        (lead_and_sale.id, "sale"),
    ]

    duplicate = postback(subid=subid, status="sale", payout="3", tid="t-1")
    assert duplicate.verdict == "duplicate"
    assert duplicate.deliveries == []

    rows = all_deliveries()
    assert sorted((d["conversion_id"], d["target_id"], d["status"]) for d in rows) == sorted(
        [
            (lead.conversion_id, lead_and_sale.id, "lead"),
            (lead.conversion_id, sale_only.id, "sale"),
            (lead.conversion_id, lead_and_sale.id, "sale"),
        ]
    )


def test_a_status_no_target_is_for_queues_nothing(db, campaign, make_click, postback):
    from models.conversions.admin import add_target

    add_target(db, "demo", "http://127.0.0.1:9/sale?s={subid}", ["sale"])
    outcome = postback(subid=make_click(), status="lead")
    assert outcome.verdict == "created" and outcome.deliveries == []
    assert all_deliveries() == []


def test_a_failing_target_is_retried_with_backoff_until_it_answers_200(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import due_deliveries, send_delivery

    target = target_server(fail_first=2, fail_code=500)
    add_target(db, "demo", target.base + "/cb?s={subid}&st={status}", ["sale"])
    subid = make_click()
    (delivery_id,) = postback(subid=subid, status="sale", payout="1").deliveries
    assert due_deliveries(db, clock=clock) == [delivery_id]

    first = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert (first.state, first.response_code, first.retry_in) == ("pending", 500, 30)
    assert "500" in first.error
    row = delivery_row(delivery_id)
    assert (row["state"], row["attempts"], row["response_code"]) == ("pending", 1, 500)
    assert "500" in row["error"]

    # Not due until the backoff has passed; an early attempt sends nothing.
    assert due_deliveries(db, clock=clock) == []
    early = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert early.state == "busy"
    assert len(target.seen()) == 1
    clock.advance(29)
    assert due_deliveries(db, clock=clock) == []
    clock.advance(1)
    assert due_deliveries(db, clock=clock) == [delivery_id]

    second = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert (second.state, second.response_code, second.retry_in) == ("pending", 500, 60)  # Doubled.
    clock.advance(59)
    assert due_deliveries(db, clock=clock) == []
    clock.advance(1)
    assert due_deliveries(db, clock=clock) == [delivery_id]

    third = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert (third.state, third.response_code) == ("sent", 200)
    row = delivery_row(delivery_id)
    assert (row["state"], row["attempts"], row["response_code"], row["error"]) == ("sent", 3, 200, "")
    assert due_deliveries(db, clock=clock) == []
    seen = target.seen()
    assert len(seen) == 3
    assert {s.path for s in seen} == {f"/cb?s={subid}&st=sale"}


def test_a_target_that_never_answers_2xx_is_given_up_after_max_attempts(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import MAX_ATTEMPTS, due_deliveries, send_delivery

    target = target_server(fail_first=10**6, fail_code=503)
    add_target(db, "demo", target.base + "/cb?s={subid}", ["sale"])
    (delivery_id,) = postback(subid=make_click(), status="sale").deliveries

    states = [send_delivery(db, delivery_id, retry_base=0, clock=clock) for _ in range(MAX_ATTEMPTS)]
    assert [r.state for r in states] == ["pending"] * (MAX_ATTEMPTS - 1) + ["failed"]
    assert states[-1].retry_in is None and "503" in states[-1].error
    row = delivery_row(delivery_id)
    assert (row["state"], row["attempts"], row["response_code"]) == ("failed", MAX_ATTEMPTS, 503)
    assert due_deliveries(db, clock=clock) == []

    clock.advance(86400)
    after = send_delivery(db, delivery_id, retry_base=0, clock=clock)
    assert (after.state, after.response_code) == ("failed", None)
    assert len(target.seen()) == MAX_ATTEMPTS
    assert delivery_row(delivery_id)["state"] == "failed"


def test_a_refused_connection_leaves_the_delivery_pending_with_an_error_sentence(
    db, campaign, make_click, postback, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import due_deliveries, send_delivery

    closed = free_port()  # Bound and released: nothing listens there.
    add_target(db, "demo", f"http://127.0.0.1:{closed}" + "/cb?s={subid}", ["sale"])
    (delivery_id,) = postback(subid=make_click(), status="sale").deliveries

    result = send_delivery(db, delivery_id, retry_base=10, clock=clock)

    assert (result.state, result.response_code, result.retry_in) == ("pending", None, 10)
    assert result.error.startswith("The request failed:") and result.error.endswith(".")
    row = delivery_row(delivery_id)
    assert (row["state"], row["attempts"], row["response_code"], row["error"]) == (
        "pending",
        1,
        None,
        result.error,
    )
    clock.advance(10)
    assert due_deliveries(db, clock=clock) == [delivery_id]


def test_post_sends_the_query_as_a_form_body_to_the_url_without_it(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery

    target = target_server()
    add_target(db, "demo", target.base + "/cb/post?s={subid}&p={payout}&t={tid}", ["sale"], method="post")
    subid = make_click()
    (delivery_id,) = postback(subid=subid, status="sale", payout="4.75", tid="x y&z").deliveries

    result = send_delivery(db, delivery_id, retry_base=30, clock=clock)

    assert result.state == "sent"
    (seen,) = target.seen()
    assert (seen.method, seen.path) == ("POST", "/cb/post")
    assert seen.body == f"s={subid}&p=4.75&t=x%20y%26z"
    assert seen.headers["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qs(seen.body) == {"s": [subid], "p": ["4.75"], "t": ["x y&z"]}


def test_a_delivery_not_due_yet_is_busy_and_sends_nothing(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery
    from models.tables.conversion import PostbackDelivery

    target = target_server()
    add_target(db, "demo", target.base + "/cb?s={subid}", ["sale"])
    (delivery_id,) = postback(subid=make_click(), status="sale").deliveries
    later = int((clock() + 60) * 1000)
    PostbackDelivery.update(next_attempt_at=later).where(PostbackDelivery.id == delivery_id).execute()

    result = send_delivery(db, delivery_id, retry_base=30, clock=clock)

    assert result.state == "busy"
    assert target.seen() == []
    row = delivery_row(delivery_id)
    assert (row["state"], row["attempts"], row["next_attempt_at"]) == ("pending", 0, later)


def test_a_second_sender_finds_the_delivery_claimed_while_the_first_is_in_flight(
    db, campaign, make_click, postback, target_server, clock
):
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery

    target = target_server(hold_first=True)
    add_target(db, "demo", target.base + "/cb?s={subid}", ["sale"])
    (delivery_id,) = postback(subid=make_click(), status="sale").deliveries
    results = {}

    def first_sender() -> None:
        try:  # Its own connection, as another consumer thread has.
            results["first"] = send_delivery(db, delivery_id, retry_base=30, clock=clock)
        finally:
            db.close()

    thread = threading.Thread(target=first_sender)
    thread.start()
    try:
        assert target.first_arrived.wait(10), "the first sender's request never arrived"
        second = send_delivery(db, delivery_id, retry_base=30, clock=clock)
        assert second.state == "busy"
        assert len(target.seen()) == 1
    finally:
        target.release.set()
        thread.join(20)
    assert results["first"].state == "sent"
    assert len(target.seen()) == 1
    assert delivery_row(delivery_id)["state"] == "sent"


# ---------------------------------------------------------------------------------------------
# End to end: `lanner serve` records the postback, the Huey consumer (`lanner worker`) sends it.


def deliveries_json(lanner) -> list[dict]:
    return json.loads(lanner("postback", "deliveries", "--json").stdout)


def test_a_postback_through_the_server_is_delivered_by_the_consumer_after_a_retry(
    lanner, start_server, start_consumer, target_server
):
    target = target_server(fail_first=1, fail_code=500)
    lanner("campaign", "create", "Demo", "--alias", "demo", "--offer-url", "https://o.example/?s={subid}")
    lanner(
        "postback",
        "target",
        "add",
        "demo",
        target.base + "/cb?s={subid}&st={status}&p={payout}&t={tid}",
        "--status",
        "sale",
    )
    key_line = lanner("postback", "key", "show").stdout.splitlines()[0]
    assert key_line.startswith("key: ")
    key = key_line.removeprefix("key: ")
    server = start_server(workers=2)
    start_consumer(LANNER_POSTBACK_RETRY_SECONDS="0.5", LANNER_FLUSH_INTERVAL="0.1")

    status, headers, _ = click(server.port, "demo")
    assert status == 302
    subid = parse_qs(urlsplit(headers["location"]).query)["s"][0]
    status, _, body = request(server.port, f"/{key}/postback?subid={subid}&status=sale&payout=2.5&tid=abc")
    assert status == 200
    assert json.loads(body)["verdict"] in ("created", "parked")  # Parked if the click is still spooled.

    seen = target.wait_for(2, deadline_seconds=20)  # The 500, then the retry.
    expected = f"/cb?s={subid}&st=sale&p=2.5&t=abc"
    assert [(s.method, s.path) for s in seen] == [("GET", expected)] * 2

    deadline = time.monotonic() + 10
    while True:
        rows = deliveries_json(lanner)
        if rows and rows[0]["state"] == "sent" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    (row,) = rows
    assert (row["state"], row["status"], row["attempts"], row["response_code"]) == ("sent", "sale", 2, 200)
    assert row["url"] == target.base + expected
    assert len(target.seen()) == 2  # Sent is final.


def test_spool_flush_by_hand_settles_queues_checkpoints_and_deletes_as_the_flusher_does(
    env, lanner, start_server, target_server, settings
):
    # It used to settle the parked postback only: no outbound task queued, landed segments kept.
    small = {**env, "LANNER_SPOOL_SEGMENT_BYTES": "1024"}  # A segment seals every ~5 clicks.
    target = target_server()
    lanner("campaign", "create", "Demo", "--alias", "demo", "--offer-url", "https://o.example/?s={subid}")
    lanner("postback", "target", "add", "demo", target.base + "/cb?s={subid}", "--status", "sale")
    key = lanner("postback", "key", "show").stdout.splitlines()[0].removeprefix("key: ")
    server = start_server(workers=1, LANNER_SPOOL_SEGMENT_BYTES="1024")  # No consumer: all stays spooled.
    subids = []
    for n in range(20):
        status, headers, _ = click(server.port, "demo", ip=f"198.51.100.{n + 1}")
        assert status == 302
        subids.append(parse_qs(urlsplit(headers["location"]).query)["s"][0])
    status, _, body = request(server.port, f"/{key}/postback?subid={subids[0]}&status=sale&payout=2")
    assert (status, json.loads(body)["verdict"]) == (200, "parked")
    segments_before = sorted(settings.spool_dir.glob("clicks.*.log"))
    assert len(segments_before) >= 3

    flushed = run_lanner(small, "spool", "flush").stdout
    assert "Inserted 20, already present 0, rejected 0." in flushed
    assert "Matched 1 parked postback(s) to their clicks; 1 outbound postback(s) queued" in flushed
    assert json.loads(lanner("status", "--json").stdout)["queue"]["pending_tasks"] == 1
    (delivery,) = deliveries_json(lanner)
    assert (delivery["state"], delivery["status"]) == ("pending", "sale")
    # Only the segment the web worker is still appending to is left.
    assert sorted(settings.spool_dir.glob("clicks.*.log")) == segments_before[-1:]
    assert target.seen() == []  # Sending is `lanner worker`'s job.


# ---------------------------------------------------------------------------------------------
# `lanner postback test URL`


def test_postback_test_sends_sample_values_and_exits_0_on_200(lanner, target_server):
    target = target_server()
    result = lanner("postback", "test", target.base + "/t?s={subid}&st={status}&p={payout}&s1={sub_id_1}")
    path = "/t?s=0000000000example&st=sale&p=1&s1=test"
    assert result.stdout.splitlines() == [f"GET {target.base}{path}", "answer: 200"]
    assert [(s.method, s.path) for s in target.seen()] == [("GET", path)]


def test_postback_test_exits_nonzero_when_the_target_answers_500(lanner, target_server):
    target = target_server(fail_first=1, fail_code=500)
    result = lanner("postback", "test", target.base + "/t?s={subid}", check=False)
    assert result.returncode != 0
    assert result.stdout.splitlines() == [
        f"GET {target.base}/t?s=0000000000example",
        "answer: 500 The target answered 500.",
    ]
    assert len(target.seen()) == 1


@pytest.mark.parametrize(
    ("template", "sentence"),
    [
        ("http://{subid}.example/cb", "Macro {subid} is not allowed in the scheme or host"),
        ("/cb?s={nope}", "Unknown macro {nope}"),
    ],
)
def test_postback_test_refuses_an_invalid_template_with_a_sentence_and_sends_nothing(
    lanner, target_server, template, sentence
):
    target = target_server()
    url = template if template.startswith("http") else target.base + template
    result = lanner("postback", "test", url, check=False)
    assert result.returncode != 0
    assert sentence in result.stderr
    assert "Traceback" not in result.stderr
    assert target.seen() == []


def test_a_payout_is_sent_with_all_its_digits(db, campaign, make_click, postback, target_server, clock):
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery

    target = target_server()
    add_target(db, "demo", target.base + "/cb?p={payout}&r={revenue}", ["sale"])
    (delivery_id,) = postback(subid=make_click(), status="sale", payout="12345.67").deliveries
    assert send_delivery(db, delivery_id, retry_base=30, clock=clock).state == "sent"
    assert [s.path for s in target.seen()] == ["/cb?p=12345.67&r=12345.67"]


def test_a_target_url_urllib_cannot_send_is_refused_or_fails_without_an_exception(
    db, campaign, make_click, postback, clock
):
    from models.admin.services import AdminError
    from models.conversions.admin import add_target
    from models.conversions.outbound import send_delivery

    try:
        add_target(db, "demo", "http://127.0.0.1:9/a b?s={subid}", ["sale"])
    except AdminError:
        return  # Refused up front: fine.
    (delivery_id,) = postback(subid=make_click(), status="sale").deliveries
    result = send_delivery(db, delivery_id, retry_base=30, clock=clock)
    assert result.state in ("pending", "failed") and result.error
