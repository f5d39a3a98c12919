"""/api/v1/platform-connections through the admin app in process, on a real migrated database, with a
local fake of the platforms for the test event."""

from __future__ import annotations

import json
import time

import pytest
from conftest import Clock, InProcessApp, request
from platform_fakes import META_PIXEL, META_TOKEN, TIKTOK_PIXEL, TIKTOK_TOKEN, PlatformFake

V1 = "/api/v1"
VIEWER_KEY = "viewer-key-0123456789"
BUYER_KEY = "buyer-key-0123456789"


@pytest.fixture
def fake():
    server = PlatformFake()
    yield server
    server.close()


@pytest.fixture
def admin(env, db, fake):
    from app import create_admin_app
    from models.admin.services import create_campaign
    from routes.v1.auth import Principal, principal_for
    from settings import load_settings

    create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}")
    extra = {
        VIEWER_KEY: Principal(user_id=7, name="viewer 7", role="viewer", can_write=False, hides_money=False),
        BUYER_KEY: Principal(user_id=8, name="buyer 8", role="buyer", can_write=True, hides_money=False),
    }

    def find_principal(database, key):
        return extra.get(key) or principal_for(database, key)

    settings = load_settings(env | {"LANNER_META_API_URL": fake.base, "LANNER_TIKTOK_API_URL": fake.base})
    app = create_admin_app(settings, db=db, find_principal=find_principal)
    return InProcessApp(app, Clock(time.time()))


@pytest.fixture
def key(db):
    from models.conversions.postbacks import read_secret

    return read_secret(db, "api_key")


def call(app, method, path, key, body=None):
    headers = {"X-Api-Key": key}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    status, _, text = request(app, V1 + path, headers, method, data)
    return status, json.loads(text) if text else None


META = {
    "name": "fb",
    "platform": "meta",
    "campaign": "demo",
    "credentials": {"pixel_id": META_PIXEL, "access_token": META_TOKEN},
    "events": {"lead": "Lead", "sale": "Purchase"},
    "test_event_code": "TEST42",
}


def test_a_connection_is_created_shown_masked_paused_tested_and_logged(admin, key, fake):
    status, created = call(admin, "POST", "/platform-connections", key, META)
    assert status == 201, created
    masked = {"pixel_id": META_PIXEL, "access_token": "****" + META_TOKEN[-4:]}
    assert (
        created["credentials"] == masked and created["campaign"] == "demo" and created["status"] == "active"
    )
    assert META_TOKEN not in json.dumps(created)

    status, listed = call(admin, "GET", "/platform-connections", key)
    assert status == 200 and [c["name"] for c in listed["items"]] == ["fb"]
    assert listed["items"][0]["credentials"] == masked
    status, shown = call(admin, "GET", f"/platform-connections/{created['id']}", key)
    assert status == 200 and shown == created

    status, paused = call(admin, "PATCH", "/platform-connections/fb", key, {"status": "paused"})
    assert status == 200 and paused["status"] == "paused"
    status, changed = call(
        admin, "PATCH", "/platform-connections/fb", key, {"events": {"sale": "Purchase"}, "status": "active"}
    )
    assert status == 200 and changed["events"] == {"sale": "Purchase"} and changed["status"] == "active"

    status, tested = call(admin, "POST", "/platform-connections/fb/test", key)
    assert status == 200 and tested["accepted"] is True, tested
    (event,) = fake.events("meta").values()
    assert event["test"] == "TEST42" and event["event_name"] == "Purchase"

    status, log = call(admin, "GET", "/platform-connections/fb/log?state=sent&limit=10", key)
    assert status == 200 and log == {"items": []}  # A test event is not a conversion's.

    status, removed = call(admin, "DELETE", "/platform-connections/fb", key)
    assert status == 200 and removed["status"] == "removed"
    status, refused = call(admin, "PATCH", "/platform-connections/fb", key, {"status": "active"})
    assert status == 400 and "removed" in refused["description"]


def test_a_refused_test_event_answers_the_platforms_message(admin, key, fake):
    body = {
        "name": "tt",
        "platform": "tiktok",
        "campaign": "demo",
        "credentials": {"pixel_code": TIKTOK_PIXEL, "access_token": "tt-wrong-token-0000"},
    }
    assert call(admin, "POST", "/platform-connections", key, body)[0] == 201
    status, tested = call(admin, "POST", "/platform-connections/tt/test", key)
    assert status == 200 and tested["accepted"] is False and "40105" in tested["answer"]
    status, _ = call(
        admin, "PATCH", "/platform-connections/tt", key, {"credentials": {"access_token": TIKTOK_TOKEN}}
    )
    assert status == 200
    assert call(admin, "POST", "/platform-connections/tt/test", key)[1]["accepted"] is True


@pytest.mark.parametrize(
    ("method", "path", "body", "code", "message"),
    [
        ("POST", "/platform-connections", META | {"platform": "myspace"}, 400, "platform must be one of"),
        (
            "POST",
            "/platform-connections",
            META | {"credentials": {"pixel_id": "1"}},
            400,
            "needs its access_token",
        ),
        ("POST", "/platform-connections", META | {"events": {"rejected": "X"}}, 400, "never sent"),
        ("POST", "/platform-connections", META | {"campaign": "nope"}, 404, "no campaign 'nope'"),
        ("POST", "/platform-connections", META | {"credentials": "token"}, 400, "credentials"),
        ("PATCH", "/platform-connections/nope", {"status": "paused"}, 404, "no platform connection"),
        ("PATCH", "/platform-connections/fb", {"status": "gone"}, 400, "one of active, paused"),
        ("GET", "/platform-connections/fb/log?state=lost", None, 400, "pending, sent"),
        ("GET", "/platform-connections/fb/log?limit=0", None, 400, "1 to 1000"),
        ("GET", "/platform-connections/fb/log?since=1", None, 400, "Unknown parameter"),
    ],
)
def test_bad_input_gets_a_clear_4xx(admin, key, method, path, body, code, message):
    assert call(admin, "POST", "/platform-connections", key, META | {"name": "fb"})[0] == 201
    status, answer = call(admin, method, path, key, body)
    assert status == code, answer
    assert message in json.dumps(answer)


def test_only_admins_see_or_change_connections(admin, key):
    assert call(admin, "POST", "/platform-connections", key, META)[0] == 201
    for other in (VIEWER_KEY, BUYER_KEY):
        assert call(admin, "GET", "/platform-connections", other)[0] == 403
        assert call(admin, "GET", "/platform-connections/fb", other)[0] == 403
        assert call(admin, "PATCH", "/platform-connections/fb", other, {"status": "paused"})[0] == 403
        assert call(admin, "POST", "/platform-connections/fb/test", other)[0] == 403
