"""Conversions sent to the ad platforms' conversion APIs (issue 30), against local fakes that enforce
each platform's documented contract (tests/platform_fakes.py): the connection object, the outbound
queue's events, Meta, TikTok and Google Ads, retries, and exactly one delivery per event id.
"""

from __future__ import annotations

import json
import logging
import zlib

import pytest
from platform_fakes import (
    GOOGLE_ACTION,
    GOOGLE_CUSTOMER,
    GOOGLE_DEVELOPER,
    GOOGLE_OAUTH,
    META_PIXEL,
    META_TOKEN,
    TIKTOK_PIXEL,
    TIKTOK_TOKEN,
    PlatformFake,
    Scripted,
)

FBCLID = "IwAR2xYz_fbclid-123"
FBP = "fb.1.1700000000000.987654321"


@pytest.fixture
def fake(clock):
    server = PlatformFake(clock)
    yield server
    server.close()


@pytest.fixture
def config(fake):
    from models.conversions.platforms.sending import PlatformConfig

    return PlatformConfig({"meta": fake.base, "tiktok": fake.base, "google_ads": fake.base})


@pytest.fixture
def source(db):
    from models.admin.sources import create_source

    return create_source(db, "Ads", "adid={adid}&fbclid={fbclid}&fbp={fbp}&ttclid={ttclid}&gclid={gclid}")


@pytest.fixture
def campaign(db, source):
    from models.admin.services import create_campaign

    return create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}", source="Ads")


@pytest.fixture
def make_click(db, campaign, clock):
    from models.clicks.record import new_subid
    from models.tables.click import Click

    def make(*, fbclid="", fbp="", ttclid="", gclid="", country="DE") -> tuple[str, int]:
        # The source's parameters fill sub_id_1.. in template order: adid, fbclid, fbp, ttclid, gclid.
        subid = new_subid()
        user_agent = "Mozilla/5.0 (platform test)"
        created_at = int(clock() * 1000)
        Click.create(
            subid=subid,
            created_at=created_at,
            campaign_id=campaign.id,
            stream_id=None,
            offer_id=None,
            ip="203.0.113.7",
            user_agent=user_agent,
            ua_hash=zlib.crc32(user_agent.encode()),
            country=country,
            sub_id_1="ad-1",
            sub_id_2=fbclid,
            sub_id_3=fbp,
            sub_id_4=ttclid,
            sub_id_5=gclid,
        )
        return subid, created_at

    return make


@pytest.fixture
def postback(db, clock):
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback

    recorder = ConversionRecorder(db, park_ms=3_600_000, clock=clock)

    def send(**params: str):
        return recorder.record(parse_postback(params), Received("GET", "127.0.0.1", "test"))

    return send


@pytest.fixture
def deliver(db, config, clock):
    from models.conversions.platforms.sending import deliver as deliver_one

    def run(delivery_id: int, **options):
        return deliver_one(db, delivery_id, retry_base=30, config=config, clock=clock, **options)

    return run


def meta_connection(db, **options):
    from models.conversions.platforms.connections import create_connection

    given = {"campaign": "demo", "credentials": {"pixel_id": META_PIXEL, "access_token": META_TOKEN}}
    return create_connection(db, options.pop("name", "fb"), "meta", **(given | options))


def row_of(delivery_id: int) -> dict:
    from models.tables.conversion import PostbackDelivery

    return PostbackDelivery.select().where(PostbackDelivery.id == delivery_id).dicts().get()


def platform_rows() -> list[dict]:
    from models.tables.conversion import PostbackDelivery

    query = PostbackDelivery.select().where(PostbackDelivery.connection_id.is_null(False))
    return list(query.order_by(PostbackDelivery.id).dicts())


def sha(value: str) -> str:
    import hashlib

    return hashlib.sha256(value.strip().lower().encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Meta


def test_a_sale_reaches_meta_once_with_fbc_from_the_clicks_fbclid_and_only_pii_hashed(
    db, make_click, postback, fake, deliver, clock
):
    meta_connection(db, test_event_code="TEST123")
    subid, click_ms = make_click(fbclid=FBCLID, fbp=FBP, country="DE")
    clock.advance(600)
    outcome = postback(subid=subid, status="sale", payout="12.5")
    (delivery_id,) = outcome.deliveries
    assert row_of(delivery_id)["connection_id"] is not None

    result = deliver(delivery_id)

    assert (result.state, result.response_code) == ("sent", 200)
    event_id = f"lanner-{outcome.conversion_id}-sale"
    events = fake.events("meta")
    assert list(events) == [f"Purchase:{event_id}"]
    event = events[f"Purchase:{event_id}"]
    assert event["event_time"] == int(clock())
    assert event["action_source"] == "website"
    assert event["custom_data"] == {"value": 12.5, "currency": "USD"}
    assert event["test"] == "TEST123"
    assert event["user_data"] == {
        "client_ip_address": "203.0.113.7",
        "client_user_agent": "Mozilla/5.0 (platform test)",
        "fbc": f"fb.1.{click_ms}.{FBCLID}",
        "fbp": FBP,
        "country": [sha("de")],
        "external_id": [sha(subid)],
    }
    (request,) = fake.seen("meta")
    assert request.path == f"/v21.0/{META_PIXEL}/events"
    row = row_of(delivery_id)
    assert (row["state"], row["attempts"], row["response_code"], row["error"]) == ("sent", 1, 200, "")
    assert META_TOKEN not in row["url"]

    from models.reporting.conversionlog import LogFilter, list_deliveries

    (logged,) = list_deliveries(db, LogFilter())  # The outbound log names the connection.
    assert (logged["target_id"], logged["connection_id"], logged["state"]) == (None, 1, "sent")

    # Sent is final: another attempt, much later, sends nothing.
    clock.advance(3600)
    assert deliver(delivery_id).state == "sent"
    assert len(fake.seen("meta")) == 1 and fake.repeats == []


def test_the_fake_refuses_what_meta_refuses(fake, clock):
    """The fake is only worth its tests if it refuses what Meta documents it refuses."""
    from models.conversions.platforms import meta
    from models.conversions.platforms.events import Connection, Event, Request
    from models.conversions.platforms.sending import http_post

    connection = Connection(
        1, "fb", "meta", 1, None, {"pixel_id": META_PIXEL, "access_token": META_TOKEN}, {}, "", "active"
    )
    now = int(clock())

    def event(**changes) -> Event:
        fields = dict(
            delivery_id=1,
            event_id="e1",
            event_name="Purchase",
            event_time=now,
            value=1.0,
            currency="USD",
            click_time_ms=now * 1000,
            ip="203.0.113.1",
            user_agent="UA",
            click_ids={"fbclid": "x"},
        )
        return Event(**(fields | changes))

    def answer(events, connection=connection):
        reply = http_post(meta.request(connection, events, fake.base))
        return reply.code, json.loads(reply.body)

    assert answer([event()])[0] == 200
    old = answer([event(event_id="e2"), event(event_id="e3", event_time=now - 8 * 86400)])
    assert old[0] == 400 and old[1]["error"]["error_subcode"] == 2804003
    assert "Purchase:e2" not in fake.events("meta")  # The whole batch was refused.
    too_many = answer([event(event_id=f"m{i}") for i in range(1001)])
    assert too_many[0] == 400 and "1000" in too_many[1]["error"]["message"]
    bad_token = Connection(
        1, "fb", "meta", 1, None, {"pixel_id": META_PIXEL, "access_token": "wrong"}, {}, "", "active"
    )
    assert answer([event(event_id="e4")], bad_token)[1]["error"]["code"] == 190
    unhashed = meta.event_data(event(event_id="e5"))
    unhashed["user_data"]["country"] = ["de"]
    unhashed_body = json.dumps({"data": [unhashed], "access_token": META_TOKEN}).encode()
    reply = http_post(
        Request(f"{fake.base}/v21.0/{META_PIXEL}/events", {"Content-Type": "application/json"}, unhashed_body)
    )
    assert reply.code == 400 and json.loads(reply.body)["error"]["error_subcode"] == 2804015


def test_an_event_older_than_seven_days_is_marked_expired_and_never_sent_and_its_batch_goes(
    db, make_click, postback, fake, deliver, clock
):
    meta_connection(db)
    old_subid, _ = make_click(fbclid="old")
    (old,) = postback(subid=old_subid, status="sale", payout="5").deliveries
    clock.advance(7 * 86400 + 60)  # The platform was away (or the worker down) for over a week.
    new_subid, _ = make_click(fbclid="new")
    new_outcome = postback(subid=new_subid, status="sale", payout="6")
    (new,) = new_outcome.deliveries

    result = deliver(old)

    assert result.state == "expired" and "7 days" in result.error
    assert row_of(old)["state"] == "expired"
    assert row_of(new)["state"] == "sent"  # Its batch-mate, sent in the same request.
    assert list(fake.events("meta")) == [f"Purchase:lanner-{new_outcome.conversion_id}-sale"]
    assert deliver(old).state == "expired"


def test_a_click_without_a_user_agent_fails_its_event_alone_and_its_batch_goes(
    db, campaign, make_click, postback, fake, deliver
):
    from models.clicks.record import new_subid
    from models.tables.click import Click

    meta_connection(db)
    bare = new_subid()
    Click.create(
        subid=bare,
        created_at=1_800_000_000_000,
        campaign_id=campaign.id,
        ip="203.0.113.9",
        user_agent="",
        ua_hash=0,
    )
    (without,) = postback(subid=bare, status="sale", payout="1").deliveries
    subid, _ = make_click(fbclid=FBCLID)
    (with_agent,) = postback(subid=subid, status="sale", payout="1").deliveries

    result = deliver(without)

    assert result.state == "failed" and "no user agent" in result.error
    assert row_of(with_agent)["state"] == "sent" and len(fake.events("meta")) == 1


def test_rejected_and_trash_are_never_sent_and_rejected_then_approved_is_sent_once(
    db, make_click, postback, fake, deliver, clock
):
    from models.admin.errors import AdminError
    from models.conversions.networks import create_network
    from models.conversions.platforms.connections import parse_events

    with pytest.raises(AdminError, match="never sent"):
        parse_events(["rejected=Refund"])
    with pytest.raises(AdminError, match="never sent"):
        parse_events(["trash=Spam"])
    create_network(db, "Corrects", alias="corrects", subid_macro="{sub1}", status_changes="any")
    meta_connection(db, events=["lead=Lead", "sale=Purchase"])
    subid, _ = make_click(fbclid=FBCLID)

    sent = []
    for status in ("lead", "rejected", "sale", "rejected", "sale", "trash"):
        clock.advance(60)
        outcome = postback(subid=subid, status=status, payout="9", **{"from": "corrects"})
        assert outcome.verdict in ("created", "updated"), outcome.detail
        for delivery_id in outcome.deliveries:
            sent.append(deliver(delivery_id).state)

    assert sent == ["sent", "sent"]  # Lead, then Purchase; the second approval queues nothing.
    assert sorted(key.split(":")[0] for key in fake.events("meta")) == ["Lead", "Purchase"]
    assert [row["status"] for row in platform_rows()] == ["lead", "sale"]
    assert fake.repeats == []


def test_a_batch_holds_at_most_a_thousand_events_and_each_is_sent_once(
    db, make_click, postback, fake, deliver
):
    meta_connection(db)
    ids = []
    for _ in range(1_050):
        subid, _ = make_click(fbclid=FBCLID)
        ids.extend(postback(subid=subid, status="sale", payout="1").deliveries)

    first = deliver(ids[0])
    assert first.state == "sent"
    sizes = [len(r.body["data"]) for r in fake.seen("meta")]
    assert sizes == [1_000]
    assert sum(row["state"] == "sent" for row in platform_rows()) == 1_000
    assert deliver(ids[5]).state == "sent"  # Sent in the first batch: nothing more.
    assert deliver(ids[-1]).state == "sent"
    assert [len(r.body["data"]) for r in fake.seen("meta")] == [1_000, 50]
    assert len(fake.events("meta")) == 1_050 and fake.repeats == []


@pytest.mark.parametrize("platform", ["meta", "tiktok"])
def test_an_event_the_platform_refuses_fails_alone_and_its_batch_mates_are_sent(
    db, make_click, postback, fake, deliver, platform
):
    """Meta and TikTok refuse a whole request for one invalid event: the sender splits the batch
    down to that event, which fails with the platform's message, and sends the others once."""
    if platform == "meta":
        meta_connection(db)
    else:
        tiktok_connection(db)
    ids, conversions = [], []
    for _ in range(10):
        subid, _ = make_click(fbclid=FBCLID, ttclid="tt-1")
        outcome = postback(subid=subid, status="sale", payout="1")
        ids.extend(outcome.deliveries)
        conversions.append(outcome.conversion_id)
    fake.refused_event_ids.add(f"lanner-{conversions[6]}-sale")

    deliver(ids[0])

    states = [row_of(i)["state"] for i in ids]
    assert states == ["sent"] * 6 + ["failed"] + ["sent"] * 3
    assert "is not valid" in row_of(ids[6])["error"]
    assert len(fake.events(platform)) == 9 and fake.repeats == []
    assert len(fake.seen(platform)) <= 1 + 2 * 4  # Halves down to the one event: log2(10) levels.


def test_500_garbage_and_429_are_logged_and_retried_with_backoff_or_retry_after_then_sent_once(
    db, make_click, postback, fake, deliver, clock
):
    meta_connection(db)
    subid, _ = make_click(fbclid=FBCLID)
    (delivery_id,) = postback(subid=subid, status="sale", payout="3").deliveries
    fake.script(
        Scripted(500, b'{"error": {"message": "An unknown error occurred", "code": 1}}'),
        Scripted(200, b"<html>gateway</html>"),
        Scripted(429, b'{"error": {"message": "Too many calls", "code": 4}}', {"Retry-After": "600"}),
    )

    first = deliver(delivery_id)
    assert (first.state, first.response_code, first.retry_in) == ("pending", 500, 30)
    assert "An unknown error occurred" in row_of(delivery_id)["error"]
    assert deliver(delivery_id).state == "busy"  # Not due yet.
    clock.advance(30)
    second = deliver(delivery_id)
    assert (second.state, second.retry_in) == ("pending", 60)
    assert "unexpected body" in row_of(delivery_id)["error"]
    clock.advance(60)
    third = deliver(delivery_id)
    assert (third.state, third.response_code, third.retry_in) == ("pending", 429, 600)  # Retry-After wins.
    assert "429" in row_of(delivery_id)["error"]
    clock.advance(599)
    assert deliver(delivery_id).state == "busy"
    clock.advance(1)
    assert deliver(delivery_id).state == "sent"
    assert len(fake.events("meta")) == 1 and fake.repeats == []
    row = row_of(delivery_id)
    assert (row["state"], row["attempts"], row["error"]) == ("sent", 4, "")


def test_a_slow_platform_is_retried_and_the_event_is_sent_once(
    db, make_click, postback, fake, deliver, clock
):
    from models.conversions.platforms.sending import http_post

    meta_connection(db)
    subid, _ = make_click(fbclid=FBCLID)
    (delivery_id,) = postback(subid=subid, status="sale", payout="3").deliveries
    fake.script(Scripted(200, b'{"events_received": 1}', hang=3))

    slow = deliver(delivery_id, post=lambda request: http_post(request, timeout=0.5))
    assert slow.state == "pending" and "timed out" in slow.error
    clock.advance(30)
    assert deliver(delivery_id).state == "sent"
    assert len(fake.events("meta")) == 1 and fake.repeats == []


def test_a_bad_token_is_logged_and_retried_and_the_event_goes_once_the_token_is_fixed(
    db, make_click, postback, fake, deliver, clock
):
    from models.conversions.platforms.connections import change_connection

    meta_connection(db, credentials={"pixel_id": META_PIXEL, "access_token": "EAAB-expired-token-xyz"})
    subid, _ = make_click(fbclid=FBCLID)
    (delivery_id,) = postback(subid=subid, status="sale", payout="3").deliveries

    refused = deliver(delivery_id)
    assert refused.state == "pending" and "code 190" in refused.error
    change_connection(db, "fb", credentials={"access_token": META_TOKEN})
    clock.advance(30)
    assert deliver(delivery_id).state == "sent"
    assert len(fake.events("meta")) == 1


def test_an_event_is_given_up_after_the_last_attempt(db, make_click, postback, fake, deliver, clock):
    from models.conversions.outbound import MAX_ATTEMPTS

    meta_connection(db)
    subid, _ = make_click(fbclid=FBCLID)
    (delivery_id,) = postback(subid=subid, status="sale", payout="3").deliveries
    fake.script(*[Scripted(503, b"down")] * MAX_ATTEMPTS)
    for _ in range(MAX_ATTEMPTS):
        result = deliver(delivery_id)
        clock.advance(result.retry_in or 0)
    assert result.state == "failed" and row_of(delivery_id)["state"] == "failed"
    assert fake.events("meta") == {}


def test_a_paused_connection_queues_nothing_new_and_holds_its_events_until_resumed(
    db, make_click, postback, fake, deliver, clock
):
    from models.conversions.platforms.connections import set_connection_status

    meta_connection(db)
    subid, _ = make_click(fbclid=FBCLID)
    (held,) = postback(subid=subid, status="sale", payout="3").deliveries
    set_connection_status(db, "fb", "paused")
    other, _ = make_click(fbclid=FBCLID)
    assert postback(subid=other, status="sale", payout="3").deliveries == []  # Paused: nothing queued.

    assert deliver(held).state == "held"
    assert row_of(held)["state"] == "pending" and row_of(held)["attempts"] == 0
    assert fake.seen() == []
    set_connection_status(db, "fb", "active")
    assert deliver(held).state == "sent"  # Due at once on resume, not an hour later.
    assert len(fake.events("meta")) == 1


def test_a_source_connection_sends_the_conversions_of_every_campaign_of_the_source(
    db, campaign, make_click, postback, fake, deliver
):
    from models.admin.services import create_campaign
    from models.clicks.record import new_subid
    from models.conversions.platforms.connections import create_connection
    from models.tables.click import Click

    create_connection(
        db,
        "fb-source",
        "meta",
        source="Ads",
        credentials={"pixel_id": META_PIXEL, "access_token": META_TOKEN},
    )
    second = create_campaign(db, "Second", "second", offer_url="https://o.example/?s={subid}", source="Ads")
    other = create_campaign(db, "Other", "other", offer_url="https://o.example/?s={subid}")
    subids = {}
    for target in (campaign, second, other):
        subids[target.alias] = new_subid()
        Click.create(
            subid=subids[target.alias],
            created_at=1_800_000_000_000,
            campaign_id=target.id,
            ip="203.0.113.9",
            user_agent="UA",
            ua_hash=1,
            sub_id_2=f"fbclid-{target.alias}",
        )
    queued = {
        alias: postback(subid=subid, status="sale", payout="2").deliveries for alias, subid in subids.items()
    }
    assert [len(queued[alias]) for alias in ("demo", "second", "other")] == [1, 1, 0]
    deliver(queued["demo"][0])
    fbcs = sorted(e["user_data"]["fbc"].rsplit(".", 1)[1] for e in fake.events("meta").values())
    assert fbcs == ["fbclid-demo", "fbclid-second"]  # One request, both campaigns' events.


def test_credentials_are_shown_masked_audited_masked_and_never_logged(
    db, make_click, postback, fake, deliver, caplog
):
    from models.conversions.platforms.connections import get_connection, list_connections
    from models.tables.account import AuditEntry

    caplog.set_level(logging.DEBUG)
    view = meta_connection(db)
    assert view.credentials == {"pixel_id": META_PIXEL, "access_token": "****" + META_TOKEN[-4:]}
    assert get_connection(db, "fb").credentials == view.credentials
    assert list_connections(db)[0].credentials == view.credentials
    subid, _ = make_click(fbclid=FBCLID)
    (delivery_id,) = postback(subid=subid, status="sale", payout="3").deliveries
    fake.script(Scripted(500, b"no"))
    deliver(delivery_id)
    audit = [entry.new_values for entry in AuditEntry.select() if entry.entity == "platform_connection"]
    assert audit and all(META_TOKEN not in text for text in audit)
    # Peewee's own DEBUG log of every statement's parameters is left out: it shows any stored secret.
    assert not [r for r in caplog.records if r.name != "peewee" and META_TOKEN in r.getMessage()]
    assert all(META_TOKEN not in json.dumps(row, default=str) for row in platform_rows())


def test_bad_connections_are_refused_with_one_sentence(db, campaign):
    from models.admin.errors import AdminError
    from models.conversions.platforms.connections import create_connection

    cases = [
        (dict(platform="myspace"), "platform must be one of"),
        (dict(credentials={"pixel_id": META_PIXEL}), "needs its access_token"),
        (
            dict(credentials={"pixel_id": META_PIXEL, "access_token": "t", "password": "x"}),
            "no credential 'password'",
        ),
        (dict(campaign=None), "one campaign or one traffic source"),
        (dict(source="Ads"), "one campaign or one traffic source"),
        (dict(events=["sale=Pur;chase"]), "not an event name"),
        (dict(events=["refund=Refund"]), "not a status"),
        (dict(campaign="nope"), "There is no campaign 'nope'"),
    ]
    for changes, message in cases:
        options = {
            "platform": "meta",
            "campaign": "demo",
            "credentials": {"pixel_id": META_PIXEL, "access_token": "t"},
        }
        options |= changes
        with pytest.raises(AdminError, match=message):
            create_connection(db, "x", options.pop("platform"), **options)
    meta_connection(db)
    with pytest.raises(AdminError, match="named 'fb' already"):
        meta_connection(db)


# ---------------------------------------------------------------------------------------------
# TikTok


def tiktok_connection(db, token=TIKTOK_TOKEN):
    from models.conversions.platforms.connections import create_connection

    return create_connection(
        db,
        "tt",
        "tiktok",
        campaign="demo",
        credentials={"pixel_code": TIKTOK_PIXEL, "access_token": token},
    )


def test_a_sale_reaches_tiktok_with_its_ttclid(db, make_click, postback, fake, deliver, clock):
    tiktok_connection(db)
    subid, _ = make_click(ttclid="E.C.P.tt-click-1")
    outcome = postback(subid=subid, status="sale", payout="7.25")
    assert deliver(outcome.deliveries[0]).state == "sent"
    event_id = f"lanner-{outcome.conversion_id}-sale"
    event = fake.events("tiktok")[event_id]
    assert event["event"] == "CompletePayment" and event["event_time"] == int(clock())
    assert event["user"] == {
        "ttclid": "E.C.P.tt-click-1",
        "ip": "203.0.113.7",
        "user_agent": "Mozilla/5.0 (platform test)",
    }
    assert event["properties"] == {"value": 7.25, "currency": "USD"}
    (request,) = fake.seen("tiktok")
    assert request.headers["access-token"] == TIKTOK_TOKEN and request.body["event_source"] == "web"


def test_tiktoks_error_code_in_an_http_200_is_a_failure_retried_until_accepted(
    db, make_click, postback, fake, deliver, clock
):
    from models.conversions.platforms.connections import change_connection

    tiktok_connection(db, token="tt-revoked-token-000000")
    subid, _ = make_click(ttclid="tt-2")
    (delivery_id,) = postback(subid=subid, status="sale", payout="1").deliveries
    refused = deliver(delivery_id)
    assert (refused.state, refused.response_code) == ("pending", 200)
    assert "code 40105" in refused.error and "revoked" in refused.error
    change_connection(db, "tt", credentials={"access_token": TIKTOK_TOKEN})
    clock.advance(30)
    assert deliver(delivery_id).state == "sent"
    assert len(fake.events("tiktok")) == 1 and fake.repeats == []


# ---------------------------------------------------------------------------------------------
# Google Ads


def google_connection(db):
    from models.conversions.platforms.connections import create_connection

    credentials = {
        "customer_id": "123-456-7890",
        "conversion_action": GOOGLE_ACTION,
        "developer_token": GOOGLE_DEVELOPER,
        "oauth_token": GOOGLE_OAUTH,
    }
    return create_connection(db, "gads", "google_ads", campaign="demo", credentials=credentials)


def test_google_partial_failure_fails_the_refused_row_and_uploads_the_others(
    db, make_click, postback, fake, deliver, clock
):
    google_connection(db)
    ids, conversions = [], []
    for gclid in ("gclid-good-1", "gclid-unknown", "gclid-good-2", ""):
        subid, _ = make_click(gclid=gclid)
        outcome = postback(subid=subid, status="sale", payout="4")
        ids.extend(outcome.deliveries)
        conversions.append(outcome.conversion_id)
    fake.unknown_gclids.add("gclid-unknown")

    result = deliver(ids[0])

    assert result.state == "sent"
    states = [(row_of(i)["state"], row_of(i)["error"]) for i in ids]
    assert states[0] == ("sent", "") and states[2] == ("sent", "")
    assert states[1][0] == "failed" and "gclid could not be decoded" in states[1][1]
    assert states[3][0] == "failed" and "no gclid" in states[3][1]  # Never sent: nothing to match.
    uploaded = fake.events("google_ads")
    assert sorted(uploaded) == sorted(f"lanner-{c}-sale" for c in (conversions[0], conversions[2]))
    row = uploaded[f"lanner-{conversions[0]}-sale"]
    assert row["conversionAction"] == f"customers/{GOOGLE_CUSTOMER}/conversionActions/{GOOGLE_ACTION}"
    assert row["conversionDateTime"] == "2027-01-15 08:00:00+00:00" and row["currencyCode"] == "USD"
    assert row["conversionValue"] == 4
    (request,) = fake.seen("google_ads")
    assert request.body["partialFailure"] is True and len(request.body["conversions"]) == 3
    assert request.headers["developer-token"] == GOOGLE_DEVELOPER
    assert request.path == f"/v17/customers/{GOOGLE_CUSTOMER}:uploadClickConversions"
    clock.advance(3600)
    assert deliver(ids[1]).state == "failed" and len(fake.seen("google_ads")) == 1


def test_a_google_test_event_is_validated_only_and_its_made_up_gclid_means_the_rest_was_accepted(
    db, campaign, fake, config
):
    from models.conversions.platforms.connections import change_connection, test_connection

    google_connection(db)
    fake.gclid_known = lambda gclid: False  # The account issued no gclid the test could name.

    answer = test_connection(db, "gads", config)
    assert answer.ok, answer.text
    assert fake.events("google_ads") == {}  # validateOnly: nothing recorded.
    (request,) = fake.seen("google_ads")
    assert request.body["validateOnly"] is True
    change_connection(db, "gads", credentials={"developer_token": GOOGLE_DEVELOPER + "-wrong"})
    refused = test_connection(db, "gads", config)
    assert not refused.ok and "developer token" in refused.text


def test_a_google_upload_repeated_after_a_lost_answer_is_refused_as_a_duplicate_not_counted_twice(
    db, make_click, postback, fake, deliver, clock
):
    """The event id is the upload's orderId: a sender that dies after Google counted a row but before
    it wrote `sent` sends the row again, and Google refuses the repeat."""
    from models.conversions.platforms.sending import http_post

    google_connection(db)
    subid, _ = make_click(gclid="gclid-1")
    (delivery_id,) = postback(subid=subid, status="sale", payout="4").deliveries

    def lost_answer(request):
        http_post(request)  # Google counts it...
        return http_post.__globals__["Reply"](
            None, b"", error="The request failed: connection reset."
        )  # ...we never hear.

    assert deliver(delivery_id, post=lost_answer).state == "pending"
    clock.advance(30)
    again = deliver(delivery_id)
    assert again.state == "failed" and "order id" in again.error
    assert len(fake.events("google_ads")) == 1


def test_a_removed_connection_fails_its_queued_events_queues_nothing_and_lets_its_source_go(
    db, make_click, postback, fake, deliver
):
    from models.admin.errors import AdminConflict, AdminError
    from models.admin.services import update_campaign
    from models.admin.sources import delete_source
    from models.conversions.platforms.connections import (
        create_connection,
        remove_connection,
        set_connection_status,
        test_connection,
    )

    create_connection(
        db,
        "fb-source",
        "meta",
        source="Ads",
        credentials={"pixel_id": META_PIXEL, "access_token": META_TOKEN},
    )
    subid, _ = make_click(fbclid=FBCLID)
    (queued,) = postback(subid=subid, status="sale", payout="2").deliveries
    update_campaign(db, "demo", clear_source=True)
    with pytest.raises(AdminConflict, match="sends conversions through ad platform connection fb-source"):
        delete_source(db, "Ads")

    assert remove_connection(db, "fb-source").status == "removed"
    result = deliver(queued)
    assert result.state == "failed" and "removed" in result.error
    assert fake.seen() == []
    with pytest.raises(AdminError, match="removed"):
        set_connection_status(db, "fb-source", "active")
    with pytest.raises(AdminError, match="removed"):
        test_connection(db, "fb-source", None)
    delete_source(db, "Ads")  # The removed connection let go of it; its log stays.
    assert row_of(queued)["state"] == "failed"


def test_events_a_dead_sender_claimed_are_sent_once_by_the_next_after_the_claim_runs_out(
    db, make_click, postback, fake, deliver, clock
):
    from models.conversions.outbound import due_deliveries
    from models.store.database import write_tx
    from models.store.deliveries import DeliveryStore

    meta_connection(db)
    ids = []
    for _ in range(3):
        subid, _ = make_click(fbclid=FBCLID)
        ids.extend(postback(subid=subid, status="sale", payout="1").deliveries)
    now_ms = int(clock() * 1000)
    with write_tx(db):  # A consumer claimed them, then died before it sent anything.
        assert all(DeliveryStore(db.connection()).claim(i, now_ms, now_ms + 40_000) for i in ids)
    assert due_deliveries(db, clock=clock) == [] and deliver(ids[0]).state == "busy"
    clock.advance(40)
    assert due_deliveries(db, clock=clock) == ids  # The minute's sweep queues them again.
    assert deliver(ids[0]).state == "sent"
    assert [deliver(i).state for i in ids[1:]] == ["sent", "sent"]  # Sent in the first one's request.
    assert len(fake.seen("meta")) == 1 and len(fake.events("meta")) == 3 and fake.repeats == []


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(
    db, make_click, postback, fake, deliver, clock
):
    meta_connection(db)
    elsewhere = PlatformFake(clock)
    try:
        subid, _ = make_click(fbclid=FBCLID)
        (delivery_id,) = postback(subid=subid, status="sale", payout="1").deliveries
        fake.script(Scripted(302, b"", {"Location": f"{elsewhere.base}/v21.0/{META_PIXEL}/events"}))
        moved = deliver(delivery_id)
        assert (moved.state, moved.response_code) == ("pending", 302)
        assert elsewhere.seen() == []
        clock.advance(30)
        assert deliver(delivery_id).state == "sent" and len(fake.events("meta")) == 1
    finally:
        elsewhere.close()


def test_the_fake_refuses_what_tiktok_and_google_refuse_and_our_batches_stay_within_their_limits(fake, clock):
    from models.conversions.platforms import google_ads, tiktok
    from models.conversions.platforms.events import Connection, Event, Request
    from models.conversions.platforms.sending import http_post

    now = int(clock())

    def events(count: int) -> list[Event]:
        return [
            Event(
                delivery_id=n,
                event_id=f"e{n}",
                event_name="Purchase",
                event_time=now,
                value=1.0,
                currency="USD",
                click_time_ms=now * 1000,
                ip="203.0.113.1",
                user_agent="UA",
                click_ids={"ttclid": "t", "gclid": "g"},
            )
            for n in range(count)
        ]

    def send(request: Request) -> tuple[int | None, dict]:
        reply = http_post(request)
        return reply.code, json.loads(reply.body)

    tt = Connection(
        1,
        "tt",
        "tiktok",
        1,
        None,
        {"pixel_code": TIKTOK_PIXEL, "access_token": TIKTOK_TOKEN},
        {},
        "",
        "active",
    )
    assert send(tiktok.request(tt, events(tiktok.BATCH_LIMIT), fake.base)) == (
        200,
        {"code": 0, "message": "OK", "request_id": "req-1", "data": {}},
    )
    code, body = send(tiktok.request(tt, events(tiktok.BATCH_LIMIT + 1), fake.base))
    assert (code, body["code"]) == (200, 40002)  # An error in an HTTP 200.
    wrong = Connection(
        1, "tt", "tiktok", 1, None, {"pixel_code": TIKTOK_PIXEL, "access_token": "nope"}, {}, "", "active"
    )
    assert send(tiktok.request(wrong, events(1), fake.base))[1]["code"] == 40105
    assert not tiktok.read_answer(200, b'{"code": 40105, "message": "revoked"}', events(1)).ok

    credentials = {
        "customer_id": GOOGLE_CUSTOMER,
        "conversion_action": GOOGLE_ACTION,
        "developer_token": GOOGLE_DEVELOPER,
        "oauth_token": GOOGLE_OAUTH,
    }
    gads = Connection(1, "g", "google_ads", 1, None, credentials, {}, "", "active")
    code, body = send(google_ads.request(gads, events(google_ads.BATCH_LIMIT), fake.base))
    assert code == 200 and "partialFailureError" not in body and len(body["results"]) == 2000
    assert send(google_ads.request(gads, events(google_ads.BATCH_LIMIT + 1), fake.base))[0] == 400
    request = google_ads.request(gads, events(1), fake.base)
    whole = json.loads(request.body) | {"partialFailure": False}
    assert (
        send(Request(request.url, request.headers, json.dumps(whole).encode()))[1]["error"]["status"]
        == "INVALID_ARGUMENT"
    )
    bad_date = json.loads(request.body)
    bad_date["conversions"][0]["conversionDateTime"] = "2027-01-15T08:00:00Z"
    body = send(Request(request.url, request.headers, json.dumps(bad_date).encode()))[1]
    assert "INVALID_STRING_DATE_TIME" in json.dumps(body["partialFailureError"])
    unauthorised = Request(request.url, request.headers | {"Authorization": "Bearer expired"}, request.body)
    assert send(unauthorised)[0] == 401
    assert google_ads.date_time(now) == "2027-01-15 08:00:00+00:00"
