"""The admin API (/api/v1) through the admin worker's app in process, on a real migrated database."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import Clock, InProcessApp, click, request, wait_until

from models.reporting.clickpath import NOT_RECORDED

V1 = "/api/v1"
VIEWER_KEY = "viewer-key-0123456789"
FRUGAL_KEY = "frugal-key-0123456789"


@pytest.fixture
def admin(env, db):
    """The admin app on the test's database; besides the install key, a viewer's key and an admin's that
    hides money (principals made up for the rules that do not depend on accounts; `accounts` has real
    ones)."""
    from app import create_admin_app
    from routes.v1.auth import Principal, principal_for
    from settings import load_settings

    extra = {
        VIEWER_KEY: Principal(user_id=7, name="viewer 7", role="viewer", can_write=False, hides_money=False),
        FRUGAL_KEY: Principal(user_id=8, name="admin 8", role="admin", can_write=True, hides_money=True),
    }

    def find_principal(database, key):
        return extra.get(key) or principal_for(database, key)

    app = create_admin_app(load_settings(env), db=db, find_principal=find_principal)
    return InProcessApp(app, Clock(time.time()))


@pytest.fixture
def key(db):
    from models.conversions.postbacks import read_secret

    return read_secret(db, "api_key")


def call(app, method, path, key=None, body=None, *, headers=None, raw=None):
    sent = dict(headers or {})
    if key is not None:
        sent.setdefault("X-Api-Key", key)
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    status, answer_headers, text = request(app, V1 + path, sent, method, data)
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text.decode()
    return status, parsed


def make_offer(admin, key, **fields):
    status, offer = call(
        admin, "POST", "/offers", key, {"name": "Offer", "url": "https://example.com/?c={subid}", **fields}
    )
    assert status == 201, offer
    return offer


def make_campaign(admin, key, alias="summer", **fields):
    offer = make_offer(admin, key, payout=3.0)
    status, campaign = call(
        admin,
        "POST",
        "/campaigns",
        key,
        {"name": alias.title(), "alias": alias, "offer_id": offer["id"], **fields},
    )
    assert status == 201, campaign
    return campaign, offer


# -- auth -------------------------------------------------------------------------------------


def test_without_a_key_every_route_but_the_document_answers_401(admin):
    status, answer = call(admin, "GET", "/campaigns")
    assert status == 401
    assert answer["title"] == "No API key"
    assert call(admin, "GET", "/openapi.json")[0] == 200


def test_a_wrong_key_answers_401_and_both_headers_carry_the_right_one(admin, key):
    assert call(admin, "GET", "/campaigns", "not-the-key")[0] == 401
    assert call(admin, "GET", "/campaigns", headers={"Authorization": "Bearer not-the-key"})[0] == 401
    assert call(admin, "GET", "/campaigns", headers={"Authorization": f"Bearer {key}"})[0] == 200
    assert call(admin, "GET", "/campaigns", key)[0] == 200


def test_a_read_only_principal_reads_but_every_write_answers_403(admin, key):
    campaign, offer = make_campaign(admin, key)
    assert call(admin, "GET", "/campaigns", VIEWER_KEY)[0] == 200
    writes = [
        ("POST", "/offers", {"name": "x", "url": "https://example.com/"}),
        ("PATCH", f"/offers/{offer['id']}", {"payout": 1}),
        ("PATCH", "/campaigns/summer", {"name": "Renamed"}),
        ("DELETE", "/campaigns/summer", None),
        ("PUT", "/status-maps", {"word": "ok", "status": "sale"}),
        ("POST", "/conversions/import", None),
    ]
    for method, path, body in writes:
        status, answer = call(admin, method, path, VIEWER_KEY, body)
        assert status == 403, (method, path, answer)
        assert answer["title"] == "Read-only key"
    status, kept = call(admin, "GET", "/campaigns/summer", key)
    assert kept["name"] == "Summer" and kept["status"] == "active"


def test_a_principal_that_hides_money_gets_no_money_field_anywhere(admin, key, db):
    campaign, offer = make_campaign(admin, key, cost_value=0.5)
    for path in ("/offers", f"/offers/{offer['id']}", "/campaigns/summer", "/reports?group=campaign"):
        status, answer = call(admin, "GET", path, FRUGAL_KEY)
        assert status == 200, answer
        text = json.dumps(answer)
        for money in ('"payout"', '"cost_value"', '"revenue"', '"cost"', '"profit"', '"roi"'):
            assert money not in text, (path, money)
    assert "payout" in json.dumps(call(admin, "GET", "/offers", key)[1])


# -- campaigns, streams, offers ------------------------------------------------------------------


def test_a_campaign_is_created_listed_changed_and_archived(admin, key):
    campaign, offer = make_campaign(admin, key, timezone="Europe/Berlin", default_url="https://example.com/x")
    assert campaign["alias"] == "summer" and campaign["timezone"] == "Europe/Berlin"
    status, changed = call(
        admin, "PATCH", f"/campaigns/{campaign['id']}", key, {"name": "Summer 2", "cost_value": 0.1}
    )
    assert status == 200 and changed["name"] == "Summer 2" and changed["cost_value"] == 0.1
    status, listed = call(admin, "GET", "/campaigns", key)
    assert [c["alias"] for c in listed["items"]] == ["summer"]
    status, archived = call(admin, "DELETE", "/campaigns/summer", key)
    assert status == 200 and archived["status"] == "archived"
    assert call(admin, "GET", "/campaigns", key)[1]["items"] == []
    assert [c["alias"] for c in call(admin, "GET", "/campaigns?all=true", key)[1]["items"]] == ["summer"]


def test_a_campaign_shows_its_click_api_token_and_new_token_rotates_it(admin, key):
    campaign, _ = make_campaign(admin, key)
    assert len(campaign["token"]) == 32
    assert call(admin, "GET", "/campaigns/summer", key)[1]["token"] == campaign["token"]
    status, changed = call(admin, "PATCH", "/campaigns/summer", key, {"new_token": True})
    assert status == 200 and len(changed["token"]) == 32 and changed["token"] != campaign["token"]
    status, same = call(admin, "PATCH", "/campaigns/summer", key, {"name": "Kept"})
    assert status == 200 and same["token"] == changed["token"]


def test_a_read_only_share_sees_the_campaign_but_not_its_click_api_token(admin, key, db):
    from models.accounts.apikeys import create_api_key
    from models.accounts.sharing import share_campaign
    from models.accounts.users import add_user

    make_campaign(admin, key)
    add_user(db, "vera", "viewer", "correct horse battery")
    share_campaign(db, "summer", "vera")
    _, reader = create_api_key(db, "vera", "read")
    assert call(admin, "GET", "/campaigns/summer", reader)[1]["token"] is None
    assert [c["token"] for c in call(admin, "GET", "/campaigns", reader)[1]["items"]] == [None]
    assert len(call(admin, "GET", "/campaigns/summer", key)[1]["token"]) == 32


def test_campaign_refusals_are_the_services_sentences_as_400_404_409(admin, key):
    make_campaign(admin, key)
    status, answer = call(admin, "POST", "/campaigns", key, {"name": "Dup", "alias": "summer", "offer_id": 1})
    assert status == 409 and answer["description"] == "A campaign with alias 'summer' already exists."
    status, answer = call(admin, "POST", "/campaigns", key, {"name": "Bad", "alias": "api", "offer_id": 1})
    assert status == 400 and answer["description"].startswith("Alias 'api' must be")
    status, answer = call(admin, "POST", "/campaigns", key, {"name": "Both", "alias": "both"})
    assert (
        status == 400 and answer["description"] == "Give exactly one of an offer URL or an existing offer id."
    )
    status, answer = call(admin, "GET", "/campaigns?archived=1", key)
    unknown = "Unknown parameter 'archived'; use all, tag, limit, cursor."
    assert status == 400 and answer["description"] == unknown
    status, answer = call(admin, "GET", "/campaigns/nowhere", key)
    assert status == 404 and answer["description"] == "There is no campaign 'nowhere'."
    status, answer = call(admin, "PATCH", "/campaigns/summer", key, {"rotation": "sideways"})
    assert status == 400 and "Rotation" in answer["description"]


def test_bad_bodies_answer_4xx_never_500(admin, key):
    make_campaign(admin, key)
    cases = [
        (b"{not json", 400, "Bad JSON"),
        (b"[1, 2]", 400, "Bad JSON"),
        (b'{"payout": NaN}', 400, "Bad JSON"),
        (json.dumps({"nmae": "typo"}).encode(), 400, "Unknown field"),
        (json.dumps({"payout": "3"}).encode(), 400, "Wrong type"),
        (json.dumps({"payout": True}).encode(), 400, "Wrong type"),
        (json.dumps({"daily_cap": 1.5}).encode(), 400, "Wrong type"),
        (json.dumps({"daily_cap": 10**30}).encode(), 400, "Wrong type"),
        (b'{"payout": 1e999}', 400, "Wrong type"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "Bad JSON"),
        (b"\xff\xfe", 400, "Bad JSON"),
        # Lone surrogates, escaped or as raw bytes: no store can encode them (were 500s).
        (b'{"name": "\\ud800"}', 400, "Bad JSON"),
        (b'{"\\udfff": "x"}', 400, "Bad JSON"),
        (b'{"name": "\xed\xa0\x80"}', 400, "Bad JSON"),
        (b'{"daily_cap": ' + b"9" * 5_000 + b"}", 400, "Bad JSON"),
    ]
    for raw, code, title in cases:
        status, answer = call(
            admin, "PATCH", "/offers/1", key, raw=raw, headers={"Content-Type": "application/json"}
        )
        assert (status, answer["title"]) == (code, title), raw
    status, answer = call(admin, "POST", "/offers", key, {"name": "No URL"})
    assert status == 400 and answer["description"] == "Field 'url' is required."
    status, answer = call(admin, "PATCH", "/offers/99", key, {"payout": 1})
    assert status == 404 and answer["description"] == "There is no offer 99."
    status, answer = call(admin, "PATCH", "/offers/1", key, {"payout": -1})
    assert status == 400 and answer["description"].startswith("A payout must be a number from 0")
    assert call(admin, "GET", "/offers/abc", key)[0] == 404


def test_ids_past_64_bits_are_no_rows_not_500s(admin, key):
    from routes.v1.pagination import encode_cursor

    huge = "99999999999999999999"
    cases = [
        ("GET", f"/offers/{huge}", 404),
        ("PATCH", f"/streams/{huge}", 404),
        ("PATCH", f"/conversions/{huge}", 404),
        ("DELETE", f"/postback-targets/{huge}", 404),
        ("GET", f"/campaigns/{huge}", 404),
        ("GET", f"/clicks?campaign={huge}", 404),
        ("GET", f"/clicks?stream={huge}", 400),
        ("GET", f"/clicks?cursor={encode_cursor(10**30)}", 400),
    ]
    for method, path, code in cases:
        status, answer = call(admin, method, path, key, {} if method == "PATCH" else None)
        assert status == code, (method, path, answer)


def test_a_body_over_the_cap_answers_413(admin, key):
    from routes.v1.spec import MAX_BODY_BYTES

    huge = b'{"name": "' + b"x" * MAX_BODY_BYTES + b'"}'
    status, answer = call(
        admin, "POST", "/offers", key, raw=huge, headers={"Content-Type": "application/json"}
    )
    assert status == 413 and answer["title"] == "Body too large"
    status, answer = call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw=b"subid\n" + b"a" * MAX_BODY_BYTES,
        headers={"Content-Type": "text/csv"},
    )
    assert status == 413


def test_streams_take_filters_weighted_offers_and_a_new_order(admin, key):
    campaign, first = make_campaign(admin, key)
    second = make_offer(admin, key)
    body = {
        "name": "US mobile",
        "filters": ["country=US,GB", "device=mobile"],
        "offers": [{"offer_id": first["id"], "weight": 70}, {"offer_id": second["id"], "weight": 30}],
        "daily_cap": 100,
    }
    status, stream = call(admin, "POST", "/campaigns/summer/streams", key, body)
    assert status == 201, stream
    assert stream["filters"] == ["country=US,GB", "device=mobile"]
    assert stream["offers"] == [
        {"offer_id": first["id"], "weight": 70},
        {"offer_id": second["id"], "weight": 30},
    ]
    status, listed = call(admin, "GET", "/campaigns/summer/streams", key)
    default_id = listed["items"][0]["id"]
    assert [s["id"] for s in listed["items"]] == [default_id, stream["id"]]
    status, ordered = call(
        admin, "PUT", "/campaigns/summer/streams/order", key, {"streams": [stream["id"], default_id]}
    )
    assert status == 200, ordered
    assert [s["id"] for s in call(admin, "GET", "/campaigns/summer/streams", key)[1]["items"]] == [
        stream["id"],
        default_id,
    ]
    status, answer = call(admin, "PUT", "/campaigns/summer/streams/order", key, {"streams": [stream["id"]]})
    assert status == 400 and answer["description"].startswith(
        "List every stream of the campaign exactly once"
    )
    status, changed = call(
        admin,
        "PATCH",
        f"/streams/{stream['id']}",
        key,
        {"offers": [{"offer_id": second["id"]}], "clear_filters": True, "clear_caps": True},
    )
    assert status == 200, changed
    assert changed["filters"] == [] and changed["daily_cap"] is None
    assert changed["offers"] == [{"offer_id": second["id"], "weight": 100}]
    status, answer = call(
        admin,
        "POST",
        "/campaigns/summer/streams",
        key,
        {"filters": ["planet=mars"], "offers": body["offers"]},
    )
    assert status == 400 and "planet" in answer["description"]
    status, answer = call(admin, "POST", "/campaigns/summer/streams", key, {"name": "no offers"})
    assert (
        status == 400 and answer["description"] == "A stream that sends to offers needs at least one --offer."
    )
    status, removed = call(admin, "DELETE", f"/streams/{stream['id']}", key)
    assert status == 200 and removed["status"] == "deleted"
    assert call(admin, "GET", f"/streams/{stream['id']}", key)[0] == 404


def test_a_stream_change_reaches_the_web_workers(admin, key, start_app):
    make_campaign(admin, key)
    web = start_app()
    assert click(web, "summer")[0] == 302
    stream_id = call(admin, "GET", "/campaigns/summer/streams", key)[1]["items"][0]["id"]
    assert call(admin, "PATCH", f"/streams/{stream_id}", key, {"filters": ["country=DE"]})[0] == 200
    web.clock.advance(1.2)  # Workers reload the config within a second.
    # Another visitor (a repeat within the debounce would get the first answer again), country unknown.
    assert click(web, "summer", ip="203.0.113.99")[0] == 404


# -- postback set-up --------------------------------------------------------------------------


def test_postback_targets_and_status_maps(admin, key):
    make_campaign(admin, key)
    body = {
        "campaign": "summer",
        "url": "https://source.example/pb?c={subid}&p={payout}",
        "statuses": ["sale"],
    }
    status, target = call(admin, "POST", "/postback-targets", key, body)
    assert status == 201, target
    assert call(admin, "GET", "/postback-targets?campaign=summer", key)[1]["items"][0]["id"] == target["id"]
    status, answer = call(admin, "POST", "/postback-targets", key, {**body, "statuses": ["won"]})
    assert status == 400 and answer["description"].startswith("Status must be one of")
    status, answer = call(admin, "GET", "/postback-targets?campain=summer", key)
    assert (
        status == 400 and answer["description"] == "Unknown parameter 'campain'; use campaign, limit, cursor."
    )
    assert call(admin, "DELETE", f"/postback-targets/{target['id']}", key)[0] == 200
    assert call(admin, "DELETE", f"/postback-targets/{target['id']}", key)[0] == 404
    status, mapped = call(
        admin, "PUT", "/status-maps", key, {"word": "Approved2", "status": "sale", "network": "net"}
    )
    assert status == 200 and mapped == {
        "network": "net",
        "raw_status": "approved2",
        "status": "sale",
        "remapped": 0,
    }
    assert call(admin, "GET", "/status-maps", key)[1]["items"] == [
        {"network": "net", "raw_status": "approved2", "status": "sale"}
    ]
    assert call(admin, "DELETE", "/status-maps/approved2?network=net", key)[0] == 200
    status, answer = call(admin, "DELETE", "/status-maps/approved2?network=net", key)
    assert status == 404 and answer["description"] == "There is no map for 'approved2' of network 'net'."


# -- logs, pagination, conversions, costs ----------------------------------------------------------


@pytest.fixture
def clicks(db):
    """250 stored clicks over two campaigns in the last day."""
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 250, 1, campaigns=2, seed=5) == 250
    return 250


def walk(admin, key, path, limit=100):
    pages, cursor = [], None
    while True:
        sep = "&" if "?" in path else "?"
        status, answer = call(
            admin, "GET", f"{path}{sep}limit={limit}" + (f"&cursor={cursor}" if cursor else ""), key
        )
        assert status == 200, answer
        pages.append(answer["items"])
        cursor = answer["next"]
        if cursor is None:
            return pages


def test_the_click_log_walks_250_clicks_in_pages_of_100_without_a_repeat(admin, key, clicks):
    pages = walk(admin, key, "/clicks")
    assert [len(p) for p in pages] == [100, 100, 50]
    ids = [row["id"] for p in pages for row in p]
    assert len(set(ids)) == 250 and ids == sorted(ids, reverse=True)
    campaign_pages = walk(admin, key, "/clicks?campaign=1", limit=40)
    times = [(row["created_at"], row["id"]) for p in campaign_pages for row in p]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    status, answer = call(admin, "GET", "/clicks?campaign=1&limit=500", key)
    assert len(answer["items"]) == len(times) and answer["next"] is None


def test_clicks_of_one_millisecond_are_paged_by_id_none_lost_or_repeated(admin, key, db):
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 30, 1e-9, campaigns=1, seed=9)  # 30 clicks in the same millisecond.
    rows = [row for p in walk(admin, key, "/clicks?campaign=1", limit=7) for row in p]
    assert len({row["created_at"] for row in rows}) == 1
    assert len(rows) == 30 and len({row["id"] for row in rows}) == 30


def test_a_click_is_shown_with_its_routing_trace(admin, key, clicks):
    row = call(admin, "GET", "/clicks?limit=1", key)[1]["items"][0]
    status, shown = call(admin, "GET", f"/clicks/{row['subid']}", key)
    assert status == 200, shown
    assert shown["click"]["id"] == row["id"] and shown["streams"]
    assert {"stream", "verdict", "filters"} <= set(shown["streams"][0])
    # A generated click's recorded path: its stream, its offer and the 302, in words, in the log and
    # on the click alike (a click stored before the path was kept: tests/test_click_path.py).
    from models.tables.offer import Offer

    offer = Offer.get_by_id(row["offer_id"]).name
    assert row["path"] == shown["path"] != NOT_RECORDED
    assert offer in shown["path"] and "302" in shown["path"], shown["path"]
    status, answer = call(admin, "GET", "/clicks/nosuchsubid", key)
    assert status == 404 and answer["description"].startswith("There is no stored click 'nosuchsubid'")
    assert "cost" not in call(admin, "GET", f"/clicks/{row['subid']}", FRUGAL_KEY)[1]["click"]


def test_the_click_log_refuses_bad_limits_cursors_and_parameters(admin, key, clicks):
    for query, title in (
        ("limit=0", "Bad limit"),
        ("limit=501", "Bad limit"),
        ("limit=ten", "Bad limit"),
        ("cursor=%%%", "Bad cursor"),
        ("cursor=WyJ4Il0", "Bad cursor"),  # ["x"]
        ("bots=maybe", "Invalid parameter"),
        ("countyr=US", "Unknown parameter"),
        ("from=yesterday", "Refused"),
    ):
        status, answer = call(admin, "GET", f"/clicks?{query}", key)
        assert (status, answer["title"]) == (400, title), (query, answer)
    assert call(admin, "GET", "/clicks?limit=3&bots=false&country=unknown", key)[0] == 200


def test_a_user_who_hides_money_corrects_a_status_but_sets_no_payout(admin, key, clicks, db):
    subid = walk(admin, key, "/clicks", limit=1)[0][0]["subid"]
    call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw=f"subid,status,payout\n{subid},sale,3".encode(),
        headers={"Content-Type": "text/csv"},
    )
    conversion_id = call(admin, "GET", "/conversions", key)[1]["items"][0]["id"]
    for body in ({"payout": 0}, {"status": "rejected", "currency": "EUR"}):
        status, answer = call(admin, "PATCH", f"/conversions/{conversion_id}", FRUGAL_KEY, body)
        assert (status, answer["description"]) == (403, "This user does not set payouts."), body
    status, answer = call(admin, "PATCH", f"/conversions/{conversion_id}", FRUGAL_KEY, {"status": "rejected"})
    assert status == 200 and answer["status"] == "rejected" and "payout" not in answer


def test_conversions_import_from_csv_list_by_cursor_and_correct_one(admin, key, clicks, db):
    subids = [row["subid"] for p in walk(admin, key, "/clicks", limit=500) for row in p]
    lines = ["subid,tid,status,payout"] + [f"{s},t{n},sale,2.5" for n, s in enumerate(subids)]
    lines.append("not-a-subid,,sale,1")
    status, imported = call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw="\n".join(lines).encode(),
        headers={"Content-Type": "text/csv"},
    )
    assert status == 200, imported
    assert imported["verdicts"] == {"created": 250, "invalid": 1}
    assert imported["rows"][-1]["line"] == 252 and "is not a Lanner subid" in imported["rows"][-1]["detail"]
    again = call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw="\n".join(lines[:3]).encode(),
        headers={"Content-Type": "text/csv"},
    )[1]
    assert again["verdicts"] == {"duplicate": 2}
    pages = walk(admin, key, "/conversions")
    assert [len(p) for p in pages] == [100, 100, 50]
    assert len({row["id"] for p in pages for row in p}) == 250
    first = pages[0][0]
    status, corrected = call(
        admin, "PATCH", f"/conversions/{first['id']}", key, {"status": "rejected", "payout": 0}
    )
    assert status == 200 and corrected["status"] == "rejected" and corrected["payout"] == 0
    status, report = call(admin, "GET", "/reports?group=campaign", key)
    assert report["total"]["sales"] == 249 and report["total"]["rejected"] == 1
    assert report["total"]["revenue"] == pytest.approx(249 * 2.5)
    status, answer = call(admin, "PATCH", f"/conversions/{first['id']}", key, {"status": "won"})
    assert status == 400 and answer["description"].startswith("Status must be one of")
    assert call(admin, "PATCH", "/conversions/999999", key, {"status": "sale"})[0] == 404
    status, answer = call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw=b"subid,amount\nx,1",
        headers={"Content-Type": "text/csv"},
    )
    assert status == 400 and answer["description"].startswith("Unknown CSV column 'amount'")
    status, answer = call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw=b"subid\n",
        headers={"Content-Type": "application/json"},
    )
    assert status == 415
    status, log = call(admin, "GET", "/postbacks?limit=2", key)
    assert [row["verdict"] for row in log["items"]] == ["duplicate", "duplicate"] and log["next"]


def test_a_cost_is_spread_over_a_campaigns_clicks_in_a_period(admin, key, clicks):
    from datetime import UTC, datetime, timedelta

    today = datetime.now(UTC).date()
    body = {"campaign": "1", "from": str(today - timedelta(days=2)), "to": str(today), "amount": 50.0}
    status, spread = call(admin, "PUT", "/costs", key, body)
    assert status == 200, spread
    status, listed = call(admin, "GET", "/clicks?campaign=1&limit=500", key)
    assert spread["clicks"] == len(listed["items"]) and spread["currency"] == "USD"
    report = call(admin, "GET", "/reports?campaign=1&preset=last_7_days", key)[1]
    assert report["total"]["cost"] == pytest.approx(50.0)
    status, answer = call(admin, "PUT", "/costs", key, {**body, "amount": -1.0})
    assert status == 400 and answer["description"].startswith("The amount must be a number from 0")
    status, answer = call(admin, "PUT", "/costs", key, {**body, "dimension": "country", "value": "US"})
    assert status == 400
    assert answer["description"].startswith("'country' is neither sub_id_1 … sub_id_30, source")
    status, answer = call(admin, "PUT", "/costs", key, {**body, "dimension": "source"})
    assert status == 400 and answer["description"] == "Give dimension and value together."
    status, answer = call(admin, "PUT", "/costs", key, {**body, "from": "2001-01-01", "to": "2001-01-02"})
    assert status == 400 and answer["description"].startswith("The campaign has no clicks in that period")


def test_a_cost_is_spread_over_the_clicks_of_one_source_value_only(admin, key, clicks):
    from datetime import UTC, datetime, timedelta

    report = call(admin, "GET", "/reports?group=source&campaign=1&preset=last_7_days", key)[1]
    source = max(report["rows"], key=lambda row: row["clicks"])
    today = datetime.now(UTC).date()
    body = {"campaign": "1", "from": str(today - timedelta(days=2)), "to": str(today), "amount": 12.0}
    status, spread = call(
        admin, "PUT", "/costs", key, {**body, "dimension": "source", "value": source["source"]}
    )
    assert status == 200, spread
    assert spread["clicks"] == source["clicks"] and spread["filters"] == {"source": source["source"]}
    after = call(admin, "GET", "/reports?group=source&campaign=1&preset=last_7_days", key)[1]
    costs = {row["source"]: row["cost"] for row in after["rows"]}
    assert costs[source["source"]] == pytest.approx(12.0)
    assert sum(costs.values()) == pytest.approx(12.0)  # The generated clicks had no cost before.
    status, answer = call(admin, "PUT", "/costs", key, {**body, "dimension": "sub_id_3", "value": "nobody"})
    assert status == 400
    assert answer["description"] == (
        "The campaign has no clicks with sub_id_3=nobody in that period; nothing to spread the cost over."
    )


def test_reports_speak_the_report_language_and_name_the_valid_parameters(admin, key, clicks):
    status, report = call(
        admin, "GET", "/reports?group=campaign,country&preset=last_7_days&f.country=US,GB", key
    )
    assert status == 200, report
    assert sum(row["clicks"] for row in report["rows"]) == report["total"]["clicks"]
    status, answer = call(admin, "GET", "/reports?grop=campaign", key)
    assert status == 400
    assert answer["description"] == (
        "Unknown parameter 'grop'; use group, preset, from, to, timezone, campaign, format, sort, limit, "
        "offset or f.<name> filters."
    )
    status, answer = call(admin, "GET", "/reports?group=planet", key)
    assert status == 400 and answer["title"] == "Bad report query"
    status, headers, text = request(admin, V1 + "/reports?format=csv", {"X-Api-Key": FRUGAL_KEY})
    assert status == 200 and headers["content-type"] == "text/csv"
    header = text.decode().splitlines()[0].split(",")
    assert "clicks" in header and "revenue" not in header and "cost" not in header


def test_status_is_what_lanner_status_shows(admin, key):
    status, answer = call(admin, "GET", "/status", key)
    assert status == 200
    assert {"web", "consumer", "database", "spool"} <= set(answer)
    assert call(admin, "GET", "/status", VIEWER_KEY)[0] == 403


def test_the_delivery_log_lists_outbound_postbacks(admin, key, clicks):
    call(
        admin,
        "POST",
        "/postback-targets",
        key,
        {"campaign": "1", "url": "https://source.example/pb?c={subid}", "statuses": ["sale"]},
    )
    subid = call(admin, "GET", "/clicks?campaign=1&limit=1", key)[1]["items"][0]["subid"]
    call(
        admin,
        "POST",
        "/conversions/import",
        key,
        raw=f"subid,status\n{subid},sale".encode(),
        headers={"Content-Type": "text/csv"},
    )
    status, log = call(admin, "GET", "/postback-deliveries?campaign=1", key)
    assert status == 200 and [row["state"] for row in log["items"]] == ["pending"]
    assert call(admin, "GET", "/postback-deliveries?state=sent", key)[1]["items"] == []


# -- the document ----------------------------------------------------------------------------


def test_every_route_is_in_the_openapi_document_and_every_documented_path_is_a_route(admin):
    from falcon import inspect

    from routes.v1.openapi import openapi_path

    status, document = call(admin, "GET", "/openapi.json")
    assert status == 200 and document["openapi"] == "3.1.0"
    routed = {}
    for route in inspect.inspect_routes(admin.app):
        if route.path.startswith(V1):
            methods = {m.method.lower() for m in route.methods if m.internal is False}
            routed[openapi_path(route.path)] = methods
    documented = {path: set(operations) for path, operations in document["paths"].items()}
    assert documented == routed
    for path, operations in document["paths"].items():
        fields = set(re.findall(r"\{(\w+)\}", path))
        for operation in operations.values():
            assert {p["name"] for p in operation["parameters"] if p["in"] == "path"} == fields, path
            assert operation["summary"] and "200" in operation["responses"]
    assert len(routed) >= 20


# -- where it is served -------------------------------------------------------------------------


def test_the_admin_worker_answers_the_api_on_its_socket_and_the_click_workers_do_not(start_server, key):
    server = start_server(admin=True)
    admin_port = server.extra["admin_port"]
    status, offer = call(
        admin_port, "POST", "/offers", key, {"name": "O", "url": "https://example.com/?c={subid}"}
    )
    assert status == 201, offer
    body = {"name": "Live", "alias": "live", "offer_id": offer["id"]}
    assert call(admin_port, "POST", "/campaigns", key, body)[0] == 201
    assert call(server.port, "GET", "/campaigns", key)[0] == 404
    # The web workers pick the campaign up from the database, as they do after a CLI change.
    wait_until(
        lambda: click(server.port, "live")[0] == 302,
        10,
        "the campaign on the web workers",
        lambda: server.log,
    )


def test_without_an_admin_worker_the_web_app_serves_the_api(start_app, key):
    app = start_app(LANNER_ADMIN_BIND="off")
    assert call(app, "GET", "/campaigns", key)[0] == 200
    assert call(app, "GET", "/campaigns")[0] == 401


def test_a_stream_with_a_geo_filter_the_geo_files_cannot_answer_is_saved_with_a_warning(admin, key):
    # The test's install has no city database: a city filter can never match until one is configured.
    _, offer = make_campaign(admin, key)
    status, stream = call(
        admin,
        "POST",
        "/campaigns/summer/streams",
        key,
        {"filters": ["city=Berlin"], "offers": [{"offer_id": offer["id"]}]},
    )
    assert status == 201, stream
    assert len(stream["warnings"]) == 1 and "LANNER_GEO_DATABASE" in stream["warnings"][0]
    status, changed = call(admin, "PATCH", f"/streams/{stream['id']}", key, {"filters": ["device=mobile"]})
    assert status == 200 and changed["warnings"] == []
    status, changed = call(admin, "PATCH", f"/streams/{stream['id']}", key, {"name": "Berlin"})
    assert status == 200 and "warnings" not in changed


@pytest.fixture
def accounts(env, db):
    """The admin app with real users and keys: a buyer, a second buyer, a viewer (keys by name)."""
    from app import create_admin_app
    from models.accounts.apikeys import create_api_key
    from models.accounts.users import add_user
    from settings import load_settings

    keys = {}
    for name, role, scope in (
        ("anna", "buyer", "write"),
        ("bert", "buyer", "write"),
        ("vera", "viewer", "read"),
    ):
        add_user(db, name, role, f"{name}-password-123")
        keys[name] = create_api_key(db, name, scope)[1]
    app = create_admin_app(load_settings(env), db=db)
    return InProcessApp(app, Clock(time.time())), keys


def test_buyers_see_and_change_only_their_own_and_shared_campaigns(accounts, key, db):
    from models.accounts.sharing import share_campaign

    app, keys = accounts
    offer = make_offer(app, keys["anna"])
    status, mine = call(
        app, "POST", "/campaigns", keys["anna"], {"name": "A", "alias": "anna-a", "offer_id": offer["id"]}
    )
    assert status == 201 and mine["owner_id"] is not None, mine
    status, theirs = call(
        app,
        "POST",
        "/campaigns",
        keys["bert"],
        {"name": "B", "alias": "bert-b", "offer_url": "https://b.example/"},
    )
    assert status == 201, theirs
    status, nobodys = call(
        app, "POST", "/campaigns", key, {"name": "C", "alias": "install-c", "offer_id": offer["id"]}
    )
    assert status == 201, nobodys

    def aliases(who):
        status, listed = call(app, "GET", "/campaigns", who)
        assert status == 200, listed
        return sorted(c["alias"] for c in listed["items"])

    assert aliases(keys["anna"]) == ["anna-a"]
    assert aliases(keys["bert"]) == ["bert-b"]
    assert aliases(keys["vera"]) == []
    assert aliases(key) == ["anna-a", "bert-b", "install-c"]
    # Another buyer's campaign does not exist for anna, to read or to change.
    assert call(app, "GET", "/campaigns/bert-b", keys["anna"])[0] == 404
    assert call(app, "PATCH", "/campaigns/bert-b", keys["anna"], {"name": "Mine now"})[0] == 404
    assert call(app, "GET", "/campaigns/bert-b/streams", keys["anna"])[0] == 404
    # Shared read-only: seen, not changed; shared with edit: changed.
    share_campaign(db, "bert-b", "anna")
    share_campaign(db, "bert-b", "vera")
    assert call(app, "GET", "/campaigns/bert-b", keys["anna"])[0] == 200
    assert aliases(keys["vera"]) == ["bert-b"]
    status, answer = call(app, "PATCH", "/campaigns/bert-b", keys["anna"], {"name": "Renamed"})
    assert status == 403 and "may see campaign" in answer["description"]
    share_campaign(db, "bert-b", "anna", may_edit=True)
    status, changed = call(app, "PATCH", "/campaigns/bert-b", keys["anna"], {"name": "Renamed"})
    assert status == 200 and changed["name"] == "Renamed"
    # A viewer never writes, shared or not; and creates nothing.
    assert call(app, "PATCH", "/campaigns/bert-b", keys["vera"], {"name": "V"})[0] == 403
    assert call(app, "POST", "/offers", keys["vera"], {"name": "O", "url": "https://e.com/"})[0] == 403
    # Install-wide settings are an admin's.
    status, answer = call(app, "PUT", "/status-maps", keys["anna"], {"word": "ok", "status": "sale"})
    assert status == 403 and "admin" in answer["description"]
    assert call(app, "PUT", "/status-maps", key, {"word": "ok", "status": "sale"})[0] == 200
    # Every change names who made it.
    rows = (
        db.connection()
        .execute(
            "SELECT actor, action FROM audit_log WHERE entity = 'campaign' AND entity_id = ? ORDER BY id",
            (theirs["id"],),
        )
        .fetchall()
    )
    assert [actor for actor, _ in rows][-1] == "anna" and rows[-1][1] == "update"


def test_a_principal_that_hides_money_gets_no_raw_postback_log(admin, key):
    # Its requests and URLs carry payouts under whatever name a network uses: refused, not filtered.
    for path in ("/postbacks", "/postback-deliveries"):
        assert call(admin, "GET", path, key)[0] == 200
        status, answer = call(admin, "GET", path, FRUGAL_KEY)
        assert status == 403 and "payouts" in answer["description"]


def test_a_buyer_lists_and_reads_the_offers_its_campaigns_use_and_unused_ones_only(accounts, key):
    app, keys = accounts
    annas = make_offer(app, keys["anna"], name="Anna's")
    berts = make_offer(app, keys["bert"], name="Bert's")
    unused = make_offer(app, key, name="Nobody's yet")
    for who, alias, offer in (("anna", "anna-a", annas), ("bert", "bert-b", berts)):
        status, made = call(
            app, "POST", "/campaigns", keys[who], {"name": alias, "alias": alias, "offer_id": offer["id"]}
        )
        assert status == 201, made

    def offer_ids(who):
        status, listed = call(app, "GET", "/offers", who)
        assert status == 200, listed
        return [o["id"] for o in listed["items"]]

    assert offer_ids(keys["anna"]) == [annas["id"], unused["id"]]
    assert offer_ids(keys["vera"]) == [unused["id"]]
    assert offer_ids(key) == [annas["id"], berts["id"], unused["id"]]
    # Another buyer's offer does not exist for anna, to read or to change: as in the panel.
    status, answer = call(app, "GET", f"/offers/{berts['id']}", keys["anna"])
    assert status == 404 and answer["description"] == f"There is no offer {berts['id']}."
    assert call(app, "PATCH", f"/offers/{berts['id']}", keys["anna"], {"name": "Mine"})[0] == 404
    assert call(app, "GET", f"/offers/{berts['id']}", key)[0] == 200
    assert call(app, "GET", f"/offers/{unused['id']}", keys["vera"])[0] == 200


def test_a_buyer_naming_another_buyer_s_offer_is_told_it_does_not_exist(accounts, key, db):
    app, keys = accounts
    annas = make_offer(app, keys["anna"], name="Anna's")
    berts = make_offer(app, keys["bert"], name="Bert's")
    for who, alias, offer in (("anna", "anna-a", annas), ("bert", "bert-b", berts)):
        status, made = call(
            app, "POST", "/campaigns", keys[who], {"name": alias, "alias": alias, "offer_id": offer["id"]}
        )
        assert status == 201, made
    refused = f"There is no offer {berts['id']}."
    status, answer = call(
        app, "POST", "/campaigns", keys["anna"], {"name": "X", "alias": "anna-x", "offer_id": berts["id"]}
    )
    assert (status, answer["description"]) == (404, refused)
    [stream] = call(app, "GET", "/campaigns/anna-a/streams", keys["anna"])[1]["items"]
    for method, path, body in (
        ("POST", "/campaigns/anna-a/streams", {"offers": [{"offer_id": berts["id"]}]}),
        (
            "POST",
            "/campaigns/anna-a/streams",
            {"offers": [{"offer_id": annas["id"]}], "fallback_offer_id": berts["id"]},
        ),
        ("PATCH", f"/streams/{stream['id']}", {"offers": [{"offer_id": berts["id"]}]}),
        ("PATCH", f"/streams/{stream['id']}", {"fallback_offer_id": berts["id"]}),
    ):
        status, answer = call(app, method, path, keys["anna"], body)
        assert (status, answer["description"]) == (404, refused), (method, path, body)
    # As for an offer that does not exist at all; nothing changed; her own and the admin's still work.
    status, answer = call(
        app, "PATCH", f"/streams/{stream['id']}", keys["anna"], {"offers": [{"offer_id": 99}]}
    )
    assert (status, answer["description"]) == (404, "There is no offer 99.")
    assert call(app, "GET", "/campaigns/anna-a/streams", keys["anna"])[1]["items"] == [stream]
    assert db.connection().execute("SELECT COUNT(*) FROM campaign WHERE alias = 'anna-x'").fetchone()[0] == 0
    assert (
        call(app, "PATCH", f"/streams/{stream['id']}", keys["anna"], {"fallback_offer_id": annas["id"]})[0]
        == 200
    )
    body = {"name": "C", "alias": "install-c", "offer_id": berts["id"]}
    assert call(app, "POST", "/campaigns", key, body)[0] == 201


def test_refusals_are_answered_by_their_type_not_their_wording():
    from models.accounts.errors import AccountConflict, AccountError
    from models.admin.services import AdminConflict, AdminError, AdminNotFound
    from routes.v1.spec import refused

    assert refused(AdminNotFound("Gone.")).status == "404 Not Found"
    assert refused(AdminConflict("Taken.")).status == "409 Conflict"
    assert refused(AccountConflict("A user named 'anna' exists already (names ignore case).")).status == (
        "409 Conflict"
    )
    assert refused(AdminError("There is no way to do that.")).status == "400 Bad Request"
    assert (
        refused(AccountError("Already exists, this sentence says, but nothing is.")).status
        == "400 Bad Request"
    )


def test_a_cost_currency_without_a_rate_is_accepted_with_a_warning(admin, key):
    make_campaign(admin, key)
    fields = {"cost_model": "cpc", "cost_value": 0.5, "cost_currency": "EUR"}
    status, answer = call(admin, "PATCH", "/campaigns/summer", key, fields)
    assert status == 200 and answer["cost_currency"] == "EUR"
    assert answer["warnings"][0].startswith("EUR has no exchange rate into the report currency USD")
    status, answer = call(admin, "PATCH", "/campaigns/summer", key, {"cost_value": 0.6})
    assert status == 200 and "warnings" not in answer  # Only a change of currency is warned of.


def test_postback_target_and_status_map_changes_are_in_the_audit_log_with_who_made_them(accounts, key, db):
    from models.accounts.audit import list_audit
    from models.conversions.admin import add_target, map_status, remove_target

    app, keys = accounts
    offer = make_offer(app, keys["anna"])
    call(app, "POST", "/campaigns", keys["anna"], {"name": "A", "alias": "anna-a", "offer_id": offer["id"]})
    body = {"campaign": "anna-a", "url": "https://source.example/pb?c={subid}", "statuses": ["sale"]}
    status, target = call(app, "POST", "/postback-targets", keys["anna"], body)
    assert status == 201, target
    assert call(app, "DELETE", f"/postback-targets/{target['id']}", keys["anna"])[0] == 200
    assert call(app, "PUT", "/status-maps", key, {"word": "Approved", "status": "lead"})[0] == 200
    assert call(app, "PUT", "/status-maps", key, {"word": "approved", "status": "sale"})[0] == 200
    assert call(app, "DELETE", "/status-maps/approved", key)[0] == 200
    by_cli = add_target(db, "anna-a", "https://other.example/pb?c={subid}", ["lead"])
    remove_target(db, by_cli.id)
    map_status(db, "ok", "sale", network="net")

    entries = [e for e in list_audit(db, limit=100) if e.entity in ("postback_target", "status_map")]
    seen = sorted(
        (e.id, e.actor, e.entity, e.entity_id, e.action, e.old_values, e.new_values) for e in entries
    )
    url = body["url"]
    campaign_id = target["campaign_id"]
    assert [row[1:] for row in seen] == [
        (
            "anna",
            "postback_target",
            target["id"],
            "create",
            {},
            {"campaign_id": campaign_id, "statuses": "sale", "url": url, "method": "GET", "status": "active"},
        ),
        ("anna", "postback_target", target["id"], "remove", {"status": "active"}, {"status": "removed"}),
        (
            "install key",
            "status_map",
            None,
            "create",
            {},
            {"network": "", "raw_status": "approved", "status": "lead"},
        ),
        (
            "install key",
            "status_map",
            None,
            "update",
            {"status": "lead"},
            {"network": "", "raw_status": "approved", "status": "sale"},
        ),
        (
            "install key",
            "status_map",
            None,
            "delete",
            {"network": "", "raw_status": "approved", "status": "sale"},
            {},
        ),
        (
            "cli",
            "postback_target",
            by_cli.id,
            "create",
            {},
            {
                "campaign_id": campaign_id,
                "statuses": "lead",
                "url": by_cli.url,
                "method": "GET",
                "status": "active",
            },
        ),
        ("cli", "postback_target", by_cli.id, "remove", {"status": "active"}, {"status": "removed"}),
        ("cli", "status_map", None, "create", {}, {"network": "net", "raw_status": "ok", "status": "sale"}),
    ]


def test_a_buyer_s_stream_cannot_send_visitors_to_a_campaign_it_may_not_see(accounts, key, db):
    app, keys = accounts
    for who, alias in (("anna", "anna-a"), ("bert", "bert-b")):
        offer = make_offer(app, keys[who], name=f"{who}'s")
        assert (
            call(
                app, "POST", "/campaigns", keys[who], {"name": alias, "alias": alias, "offer_id": offer["id"]}
            )[0]
            == 201
        )
    [stream] = call(app, "GET", "/campaigns/anna-a/streams", keys["anna"])[1]["items"]
    for target in ("bert-b", "nobody"):  # Another's campaign reads as one that does not exist.
        refused = (404, f"There is no campaign {target!r}.")
        body = {"action": "campaign", "target": target}
        status, answer = call(app, "POST", "/campaigns/anna-a/streams", keys["anna"], body)
        assert (status, answer["description"]) == refused, target
        status, answer = call(app, "PATCH", f"/streams/{stream['id']}", keys["anna"], body)
        assert (status, answer["description"]) == refused, target
    assert call(app, "GET", "/campaigns/anna-a/streams", keys["anna"])[1]["items"] == [stream]
    from models.accounts.sharing import share_campaign

    share_campaign(db, "bert-b", "anna", may_edit=False)  # Seen, so a target of hers now.
    assert (
        call(
            app, "PATCH", f"/streams/{stream['id']}", keys["anna"], {"action": "campaign", "target": "bert-b"}
        )[0]
        == 200
    )
    assert (
        call(app, "POST", "/campaigns/bert-b/streams", key, {"action": "campaign", "target": "anna-a"})[0]
        == 201
    )
