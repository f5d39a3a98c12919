"""Postback rules on a real database: status mapping, allowed changes, tids, rebills, parking, re-mapping."""

from __future__ import annotations

import threading
import time

import pytest

from models.admin.services import create_campaign, create_offer, update_campaign
from models.clicks.record import new_subid, ua_hash
from models.conversions.admin import map_status
from models.conversions.postbacks import (
    ConversionRecorder,
    PostbackError,
    Received,
    parse_postback,
    read_secret,
    rotate_secret,
)
from models.reporting.currency import conversion_cost
from models.tables.click import Click
from models.tables.conversion import Conversion, PostbackLog

RECEIVED = Received("GET", "198.51.100.9", "GET /…/postback?test")


@pytest.fixture
def campaign(db):
    offer = create_offer(db, "Offer", "https://o.example/?s={subid}", payout=7.5, currency="EUR")
    return create_campaign(db, "Demo", "demo", offer_id=offer.id)


@pytest.fixture
def recorder(db, clock):
    return ConversionRecorder(db, park_ms=3_600_000, clock=clock)


def store_click(campaign, clock, offer_id: int | None = 1, subid: str | None = None) -> str:
    """A landed click (`subid`: one a postback named before it landed); its subid."""
    subid = subid or new_subid(int(clock() * 1000))
    Click.create(
        subid=subid,
        created_at=int(clock() * 1000),
        campaign_id=campaign.id,
        stream_id=1,
        offer_id=offer_id,
        ip="203.0.113.7",
        user_agent="Mozilla/5.0 test",
        ua_hash=ua_hash("Mozilla/5.0 test"),
    )
    return subid


def post(recorder, **params: str):
    return recorder.record(parse_postback(params), RECEIVED)


def conversions(subid: str) -> list[Conversion]:
    return list(Conversion.select().where(Conversion.subid == subid).order_by(Conversion.id))


@pytest.mark.parametrize(
    ("word", "status"),
    [
        ("", "sale"),
        ("lead", "lead"),
        ("SALE", "sale"),
        ("Approved", "sale"),
        ("confirmed", "sale"),
        ("paid", "sale"),
        ("pending", "lead"),
        ("hold", "lead"),
        ("declined", "rejected"),
        ("cancelled", "rejected"),
        ("chargeback", "rejected"),
        ("rebill", "rebill"),
        ("trash", "trash"),
        ("weird-state", "weird-state"),
    ],
)
def test_status_words_map_case_insensitively_with_built_in_aliases(recorder, campaign, clock, word, status):
    subid = store_click(campaign, clock)
    outcome = post(recorder, subid=subid, status=word, tid="t1")
    assert outcome.verdict == "created"
    [conversion] = conversions(subid)
    assert (conversion.status, conversion.raw_status) == (status, word.lower())


def test_missing_payout_and_currency_come_from_the_offer(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status="lead")
    [conversion] = conversions(subid)
    assert (conversion.payout, conversion.currency) == (7.5, "EUR")
    assert (conversion.campaign_id, conversion.offer_id) == (campaign.id, 1)


def test_lead_then_sale_keeps_the_original_status_and_takes_the_new_payout(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    assert post(recorder, subid=subid, status="lead", payout="1").verdict == "created"
    assert post(recorder, subid=subid, status="approved", payout="12,50").verdict == "updated"
    [conversion] = conversions(subid)
    assert (conversion.status, conversion.original_status, conversion.payout) == ("sale", "lead", 12.5)


def test_a_recorder_keeps_working_on_a_reopened_connection_and_in_another_thread(
    db, recorder, campaign, clock
):
    # It keeps its stores per connection: a reconnect, or a thread with its own, gets its own stores.
    first = store_click(campaign, clock)
    assert post(recorder, subid=first, status="lead").verdict == "created"
    db.close()
    db.connect()
    assert post(recorder, subid=first, status="sale").verdict == "updated"
    second = store_click(campaign, clock)
    verdicts = []

    def in_a_thread() -> None:
        try:
            verdicts.append(post(recorder, subid=second, status="lead").verdict)
        finally:
            db.close()  # The thread's own connection.

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert verdicts == ["created"]
    assert post(recorder, subid=second, status="sale").verdict == "updated"


def concurrently(db, count: int, action) -> list[str]:
    """`action()`'s results from `count` threads started together, each on its own connection (as
    workers are)."""
    start = threading.Barrier(count)
    results: list[str] = []

    def in_a_thread() -> None:
        try:
            start.wait()
            results.append(action())
        finally:
            db.close()

    threads = [threading.Thread(target=in_a_thread) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(results)


def test_concurrent_identical_postbacks_make_one_conversion_and_one_change(db, campaign, clock):
    # SQLite serialises them by its write lock; PostgreSQL by the click's row lock: either way the
    # later ones see the first one's row.
    subid = store_click(campaign, clock)

    def lead() -> str:
        return post(
            ConversionRecorder(db, park_ms=0, clock=clock), subid=subid, status="lead", tid="t"
        ).verdict

    assert concurrently(db, 6, lead) == ["created"] + ["duplicate"] * 5

    def sale() -> str:
        return post(
            ConversionRecorder(db, park_ms=0, clock=clock), subid=subid, status="sale", tid="t"
        ).verdict

    assert concurrently(db, 6, sale) == ["duplicate"] * 5 + ["updated"]
    [conversion] = conversions(subid)
    assert (conversion.status, conversion.original_status) == ("sale", "lead")


@pytest.mark.parametrize(
    ("first", "then", "verdict", "final"),
    [
        ("lead", "sale", "updated", "sale"),
        ("lead", "rejected", "updated", "rejected"),
        ("lead", "trash", "updated", "trash"),
        ("sale", "rejected", "updated", "rejected"),
        ("sale", "lead", "refused", "sale"),
        ("rejected", "sale", "refused", "rejected"),
        ("rejected", "lead", "refused", "rejected"),
        ("trash", "sale", "refused", "trash"),
        ("sale", "sale", "duplicate", "sale"),
        ("lead", "lead", "duplicate", "lead"),
        ("lead", "mystery", "refused", "lead"),
        ("mystery", "sale", "updated", "sale"),
    ],
)
def test_only_allowed_status_changes_apply(recorder, campaign, clock, first, then, verdict, final):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status=first, tid="t")
    outcome = post(recorder, subid=subid, status=then, tid="t")
    assert outcome.verdict == verdict
    [conversion] = conversions(subid)
    assert conversion.status == final
    assert conversion.original_status == first


def test_rebill_is_a_new_conversion_that_needs_its_own_tid(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status="sale", tid="order-1", payout="10")
    assert post(recorder, subid=subid, status="rebill", payout="10").verdict == "refused"
    assert post(recorder, subid=subid, status="rebill", tid="order-1").verdict == "refused"
    assert post(recorder, subid=subid, status="rebill", tid="order-2", payout="10").verdict == "created"
    assert post(recorder, subid=subid, status="rebill", tid="order-2", payout="10").verdict == "duplicate"
    assert post(recorder, subid=subid, status="rejected", tid="order-2").verdict == "updated"
    assert [(c.tid, c.status) for c in conversions(subid)] == [("order-1", "sale"), ("order-2", "rejected")]


def test_a_tid_adopts_the_conversion_recorded_without_one(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status="lead")
    assert post(recorder, subid=subid, status="sale", tid="T-9").verdict == "updated"
    [conversion] = conversions(subid)
    assert (conversion.tid, conversion.status) == ("T-9", "sale")


def test_without_a_tid_a_click_with_several_conversions_is_ambiguous(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status="sale", tid="a")
    post(recorder, subid=subid, status="rebill", tid="b")
    outcome = post(recorder, subid=subid, status="rejected")
    assert outcome.verdict == "refused" and "tid" in outcome.detail
    assert [c.status for c in conversions(subid)] == ["sale", "rebill"]


def test_in_url_status_maps_win_over_built_in_words(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    # Keitaro's form: the network says "lead" for a paid conversion.
    post(recorder, subid=subid, status="lead", sale_status="lead", lead_status="hold", tid="x")
    assert conversions(subid)[0].status == "sale"


def test_stored_network_map_applies_to_its_network_only(db, recorder, campaign, clock):
    map_status(db, "ok", "sale", network="adnet")
    mine, other = store_click(campaign, clock), store_click(campaign, clock)
    post(recorder, subid=mine, status="OK", **{"from": "AdNet"})
    post(recorder, subid=other, status="ok", **{"from": "othernet"})
    assert conversions(mine)[0].status == "sale"
    assert conversions(other)[0].status == "ok"  # Unmapped: stored as it came.


def test_mapping_a_word_later_remaps_stored_conversions(db, recorder, campaign, clock):
    from models.conversions.admin import add_target
    from models.tables.conversion import PostbackDelivery

    add_target(db, "demo", "https://source.example/cb?s={subid}&st={status}", ["sale"])
    update_campaign(db, "demo", cost_model="cps", cost_value=2.0)
    first, second = store_click(campaign, clock), store_click(campaign, clock)
    post(recorder, subid=first, status="done", payout="5")
    post(recorder, subid=second, status="done", payout="5")
    assert {c.status for c in Conversion.select()} == {"done"}
    assert map_status(db, "DONE", "sale") == 2
    assert {(c.status, c.original_status, c.cost) for c in Conversion.select()} == {("sale", "sale", 2.0)}
    # The traffic source hears of them now that they count: one delivery each, due at once.
    assert sorted((d.status, d.state) for d in PostbackDelivery.select()) == [("sale", "pending")] * 2
    # Now mapped: a new postback with the word is a sale at once.
    third = store_click(campaign, clock)
    post(recorder, subid=third, status="done")
    assert conversions(third)[0].status == "sale"


def test_unknown_subid_is_parked_then_matched_when_the_click_lands(recorder, campaign, clock):
    subid = new_subid(int(clock() * 1000))
    outcome = post(recorder, subid=subid, status="sale", payout="3", tid="p1", sub_id_5="from-network")
    assert outcome.verdict == "parked"
    assert conversions(subid) == []
    assert recorder.settle_parked() == []  # The click has not landed yet.
    store_click(campaign, clock, subid=subid)
    [settled] = recorder.settle_parked()
    assert settled.verdict == "created"
    [conversion] = conversions(subid)
    assert (conversion.status, conversion.payout, conversion.tid) == ("sale", 3.0, "p1")
    assert Click.get(Click.subid == subid).sub_id_5 == "from-network"
    log = PostbackLog.get(PostbackLog.subid == subid)
    assert log.verdict == "created" and "parked" in log.detail
    assert recorder.settle_parked() == []  # Settled once.


def test_a_postback_parked_just_after_its_click_landed_is_matched_by_the_idle_flusher(
    recorder, campaign, clock, settings
):
    """On PostgreSQL a postback can look for its click while a flush (on another node) is landing it,
    find none, and be parked once that flush's look for parked postbacks has passed. Found by the
    conversion histories (tests/test_histories.py): with no click landing after it, it stayed parked."""
    from workers.runtime.tasks import SETTLE_EVERY, SpoolFlusher

    subid = new_subid(int(clock() * 1000))
    assert post(recorder, subid=subid, status="sale", tid="r1").verdict == "parked"
    # Landed by a flush whose look for parked postbacks came before the postback's commit.
    store_click(campaign, clock, subid=subid)
    flusher = SpoolFlusher(settings)
    flusher.last_settle = flusher.last_sync = time.monotonic()  # It has just looked.
    assert flusher.run_once() == 0 and conversions(subid) == []  # Nothing landed: no look yet.
    flusher.last_settle -= SETTLE_EVERY
    assert flusher.run_once() == 0  # Still nothing to land, but time to look again.
    [conversion] = conversions(subid)
    assert (conversion.status, conversion.tid) == ("sale", "r1")
    assert PostbackLog.get(PostbackLog.subid == subid).verdict == "created"


# Row locks are PostgreSQL's (SQLite's BEGIN IMMEDIATE takes the whole database)
@pytest.mark.postgresql_only
def test_settling_parked_postbacks_locks_their_clicks_before_any_rollup_row(
    recorder, campaign, clock, settings, backend
):
    """PostgreSQL: settling took each parked postback's click as it came to it, holding the rollup rows
    the ones before had moved; a postback holding the next click and waiting for those rows deadlocked
    with it (a 503, or parked postbacks left until the next click landed). Found by the conversion
    histories (tests/test_histories.py) on two nodes. Now every click is locked first, in one order."""
    import psycopg

    post(recorder, subid=store_click(campaign, clock), status="lead", tid="r0")  # The rollup row exists.
    first, second = new_subid(int(clock() * 1000)), new_subid(int(clock() * 1000) + 1)
    for subid in (first, second):
        assert post(recorder, subid=subid, status="sale", tid="r1").verdict == "parked"
        store_click(campaign, clock, subid=subid)
    url = settings.database_location
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as other:
        holder.execute("SELECT 1 FROM click WHERE subid = %s FOR NO KEY UPDATE", (second,))  # A postback's.
        settled: list = []
        thread = threading.Thread(target=lambda: settled.extend(recorder.settle_parked()))
        thread.start()
        try:
            deadline = time.monotonic() + 60
            waiting = (
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            while not other.execute(waiting).fetchone()[0]:
                assert time.monotonic() < deadline, "settle_parked never waited for the held click"
                time.sleep(0.02)
            other.execute("SET lock_timeout = '2s'")
            # That postback goes on to the rollup rows: settling must not hold them while it waits.
            other.execute(
                "UPDATE rollup_campaign_hour SET leads = leads WHERE campaign_id = %s", (campaign.id,)
            )
        finally:
            holder.rollback()
            thread.join(timeout=60)
    assert sorted(outcome.verdict for outcome in settled) == ["created", "created"]


def test_parked_postbacks_expire(recorder, campaign, clock):
    subid = new_subid(int(clock() * 1000))
    post(recorder, subid=subid, status="sale")
    clock.advance(3601)
    other = store_click(campaign, clock)  # Something to settle, so the expiry pass runs.
    post(recorder, subid=new_subid(), status="lead")
    recorder.settle_parked()
    verdicts = {row.subid: row.verdict for row in PostbackLog.select()}
    assert verdicts[subid] == "expired"
    assert other not in verdicts


def test_every_postback_is_logged_with_its_verdict(recorder, campaign, clock):
    subid = store_click(campaign, clock)
    post(recorder, subid=subid, status="lead")
    post(recorder, subid=subid, status="lead")
    recorder.log_rejected(RECEIVED, "forbidden", "The postback key is wrong.", subid)
    assert [row.verdict for row in PostbackLog.select().order_by(PostbackLog.id)] == [
        "created",
        "duplicate",
        "forbidden",
    ]
    assert all(row.request == RECEIVED.request for row in PostbackLog.select())


def test_a_nul_in_what_a_network_sends_is_stored_as_a_replacement_character(recorder, campaign, clock):
    # PostgreSQL's text cannot hold a NUL; both dialects store what it can.
    subid = store_click(campaign, clock)
    received = Received("POST", "198.51.100.9\x00", "POST /…/postback note=a\x00b")
    outcome = recorder.record(parse_postback({"subid": subid, "tid": "t\x00", "sub_id_2": "s\x00"}), received)
    assert outcome.verdict == "created"
    assert conversions(subid)[0].tid == "t\ufffd"
    assert Click.get(Click.subid == subid).sub_id_2 == "s\ufffd"
    recorder.log_rejected(received, "invalid", "Bad.", "x\x00")
    logged = [
        (row.remote_ip, row.request, row.subid) for row in PostbackLog.select().order_by(PostbackLog.id)
    ]
    assert logged == [
        ("198.51.100.9\ufffd", "POST /…/postback note=a\ufffdb", subid),
        ("198.51.100.9\ufffd", "POST /…/postback note=a\ufffdb", "x\ufffd"),
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "no subid"),
        ({"subid": "{subacc4}"}, "not a Lanner subid"),
        ({"subid": "x' OR 1=1 --"}, "not a Lanner subid"),
        ({"subid": new_subid(), "payout": "abc"}, "not a number"),
        ({"subid": new_subid(), "payout": "-5"}, "from 0"),
        ({"subid": new_subid(), "payout": "nan"}, "from 0"),
        ({"subid": new_subid(), "status": "<script>"}, "not a status word"),
    ],
)
def test_malformed_postbacks_are_refused_with_a_sentence(params, message):
    with pytest.raises(PostbackError, match=message):
        parse_postback(params)


@pytest.mark.parametrize(
    ("model", "value", "status", "payout", "cost"),
    [
        ("cpa", 3.0, "lead", 10.0, 3.0),
        ("cpa", 3.0, "sale", 10.0, 3.0),
        ("cpa", 3.0, "rejected", 10.0, 0.0),
        ("cps", 4.0, "lead", 10.0, 0.0),
        ("cps", 4.0, "sale", 10.0, 4.0),
        ("revshare", 30.0, "sale", 10.0, 3.0),
        ("revshare", 30.0, "rebill", 20.0, 6.0),
        ("revshare", 30.0, "lead", 10.0, 0.0),
        ("cpc", 0.5, "sale", 10.0, 0.0),
    ],
)
def test_conversion_cost_models(model, value, status, payout, cost):
    assert conversion_cost(model, value, status, payout) == pytest.approx(cost)


def test_the_postback_key_is_generated_per_install_and_rotates(db):
    key = read_secret(db, "postback_key")
    assert len(key) == 32 and key != read_secret(db, "api_key")
    assert rotate_secret(db, "postback_key") != key
    assert read_secret(db, "postback_key") != key
