"""Spend connections at the edges: `lanner platform spend`, /api/v1/spend-connections and the panel's
platforms pages, each creating a connection, syncing it against the local fake (tests/spend_fakes.py),
reading its log, and refusing bad input with one sentence."""

from __future__ import annotations

import json
import time
import zlib
from datetime import UTC, datetime

import pytest
from conftest import Clock, InProcessApp, request
from platform_fakes import Scripted
from spend_fakes import META_ACCOUNT, META_SPEND_TOKEN, SpendFake
from test_panel import csrf_token, get, log_in, make_panel, post, users  # noqa: F401

V1 = "/api/v1"
BUYER_KEY = "buyer-key-0123456789"


@pytest.fixture(scope="module")
def fake():
    server = SpendFake()
    yield server
    server.close()


@pytest.fixture
def spend_fake(fake):
    fake.reset()
    return fake


@pytest.fixture
def clicks(db):
    """The FB source, campaign `demo`, two clicks of ad A1 a minute ago; the fake's Meta row for them."""
    from models.admin.services import create_campaign
    from models.admin.sources import create_source
    from models.clicks.record import new_subid
    from models.tables.click import Click

    create_source(db, "FB", "ad={ad_id}")
    campaign = create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}", source="FB")
    now_ms = int(time.time() * 1000) - 60_000
    for n in range(2):
        Click.create(
            subid=new_subid(),
            created_at=now_ms + n,
            campaign_id=campaign.id,
            stream_id=None,
            offer_id=None,
            ip="203.0.113.7",
            user_agent="Mozilla/5.0",
            ua_hash=zlib.crc32(b"Mozilla/5.0"),
            country="DE",
            sub_id_1="A1",
        )
    day = datetime.fromtimestamp(now_ms / 1000, UTC).date().isoformat()
    return {
        "date_start": day,
        "ad_id": "A1",
        "adset_id": "S1",
        "campaign_id": "2385001",
        "spend": "4.20",
        "account_currency": "USD",
    }


def click_costs() -> list[float]:
    from models.tables.click import Click

    return [c.cost for c in Click.select(Click.cost).order_by(Click.id)]


CREATE = {
    "name": "fb-spend",
    "platform": "meta",
    "source": "FB",
    "parameter": "ad",
    "credentials": {"ad_account_id": f"act_{META_ACCOUNT}", "access_token": META_SPEND_TOKEN},
    "mappings": {"2385001": "demo"},
}


@pytest.fixture
def admin(env, db, spend_fake):
    from app import create_admin_app
    from routes.v1.auth import Principal, principal_for
    from settings import load_settings

    buyer = Principal(user_id=8, name="buyer 8", role="buyer", can_write=True, hides_money=False)

    def find_principal(database, key):
        return buyer if key == BUYER_KEY else principal_for(database, key)

    settings = load_settings(env | {"LANNER_META_API_URL": spend_fake.base})
    return InProcessApp(create_admin_app(settings, db=db, find_principal=find_principal), Clock(time.time()))


def call(app, method, path, key, body=None):
    headers = {"X-Api-Key": key}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    status, _, text = request(app, V1 + path, headers, method, data)
    return status, json.loads(text) if text else None


def run_queued(env, spend_fake) -> int:
    """Run what "sync now" queued, as `lanner worker`'s consumer would (the real queue, read here); how
    many ran."""
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    huey = create_huey(load_settings(env | {"LANNER_META_API_URL": spend_fake.base}))
    ran = 0
    while (task := huey.dequeue()) is not None:
        huey.execute(task)
        ran += 1
    return ran


def test_the_api_queues_syncs_twice_pauses_and_logs_a_spend_connection(admin, env, db, clicks, spend_fake):
    from models.conversions.postbacks import read_secret

    key = read_secret(db, "api_key")
    spend_fake.rows["meta"] = [clicks]
    status, created = call(admin, "POST", "/spend-connections", key, CREATE)
    assert status == 201, created
    assert created["credentials"]["access_token"] == "****" + META_SPEND_TOKEN[-4:]
    assert META_SPEND_TOKEN not in json.dumps(created) and created["mappings"] == {"2385001": "demo"}
    status, queued = call(admin, "POST", "/spend-connections/fb-spend/sync", key)
    # Answered at once: the worker runs it, not the request.
    assert status == 202 and queued == {"state": "queued", "id": created["id"], "name": "fb-spend"}
    assert (
        call(admin, "GET", "/spend-connections/fb-spend/log", key)[1]["items"] == []
        and spend_fake.paths == []
    )
    assert run_queued(env, spend_fake) == 1 and click_costs() == [2.1, 2.1]
    status, log = call(admin, "GET", "/spend-connections/fb-spend/log?limit=5", key)
    run = log["items"][0]
    assert (run["state"], run["written"]) == ("done", 1)
    assert call(admin, "POST", f"/spend-connections/{created['id']}/sync", key)[0] == 202
    assert run_queued(env, spend_fake) == 1
    status, log = call(admin, "GET", "/spend-connections/fb-spend/log?limit=5", key)
    again = log["items"][0]
    assert (again["written"], again["unchanged"]) == (0, 1)
    assert [row["id"] for row in log["items"]] == [again["id"], run["id"]]
    assert call(admin, "GET", "/spend-connections", key)[1]["items"][0]["last_sync"]["id"] == again["id"]

    assert call(admin, "PATCH", "/spend-connections/fb-spend", key, {"status": "paused"})[0] == 200
    status, refused = call(admin, "POST", "/spend-connections/fb-spend/sync", key)
    assert status == 409 and "is paused: resume it first" in refused["description"]
    status, bad = call(admin, "POST", "/spend-connections", key, CREATE | {"name": "x", "platform": "bing"})
    assert (
        status == 400 and bad["description"] == "Spend is pulled from meta, propellerads, tiktok, not 'bing'."
    )
    mapped_elsewhere = CREATE | {"name": "y", "mappings": {"1": "nope"}}
    assert call(admin, "POST", "/spend-connections", key, mapped_elsewhere)[0] == 404
    assert (
        call(admin, "GET", "/spend-connections/y", key)[0] == 404
    )  # Created with its mappings, or not at all.
    assert call(admin, "GET", "/spend-connections", BUYER_KEY)[0] == 403
    assert call(admin, "GET", "/spend-connections/fb-spend/log?limit=0", key)[0] == 400


def test_the_panel_creates_a_spend_connection_queues_a_sync_and_shows_its_log_when_it_lands(
    make_panel,  # noqa: F811
    users,  # noqa: F811
    env,
    db,
    clicks,
    spend_fake,
):
    panel = make_panel(LANNER_META_API_URL=spend_fake.base)
    spend_fake.rows["meta"] = [clicks]
    cookie = log_in(panel)
    listing = get(panel, "/panel/platforms", cookie)[2]
    assert listing.index("<main") < listing.index("No spend connections yet.")
    form = {
        "do": "spend",
        "name": "fb <spend>",
        "platform": "meta",
        "source": "FB",
        "parameter": "ad",
        "ad_account_id": f"act_{META_ACCOUNT}",
        "access_token": "wrong-token-000000000",
        "mappings": "2385001=demo",
        "csrf_token": csrf_token(listing),
    }
    refused = post(panel, "/panel/platforms", form | {"parameter": "nope"}, cookie=cookie)
    assert refused[0] == 400 and "is neither a parameter of traffic source" in refused[2].decode()
    assert "wrong-token-000000000" not in refused[2].decode()  # A secret is never shown back.
    status, headers, _ = post(panel, "/panel/platforms", form, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/platforms/spend/1?done=created"
    page = get(panel, headers["location"], cookie)[2]
    assert "fb &lt;spend&gt;" in page and "wrong-token-000000000" not in page and "2385001=demo" in page

    token = csrf_token(page)
    sync = {"do": "sync", "csrf_token": token}

    def sync_now() -> str:
        status, headers, _ = post(panel, "/panel/platforms/spend/1", sync, cookie=cookie)
        assert status == 303 and "done=queued" in headers["location"]
        queued = get(panel, headers["location"], cookie)[2]
        # Queued, not run: the page says so and its log looks again until the run lands.
        assert "Queued: the worker syncs it now" in queued and 'hx-trigger="every 2s"' in queued
        assert run_queued(env, spend_fake) == 1
        landed = get(panel, headers["location"], cookie)[2]
        assert 'hx-trigger="every' not in landed  # Landed: the log stops looking.
        return landed

    failed = sync_now()
    assert "Invalid OAuth access token" in failed and failed.count('class="status failed"') == 1
    saved = {"do": "save", "access_token": META_SPEND_TOKEN, "csrf_token": token}
    assert post(panel, "/panel/platforms/spend/1", saved, cookie=cookie)[0] == 303
    done = sync_now()
    assert click_costs() == [2.1, 2.1]
    assert done.count('class="status failed"') == 1 and done.count('class="status done"') == 1
    assert '<span class="status done">done</span>' in get(panel, "/panel/platforms", cookie)[2]
    buyer = log_in(panel, "bert")
    assert get(panel, "/panel/platforms/spend/1", buyer)[0] == 403


def test_the_cli_creates_maps_syncs_and_logs_and_a_failed_sync_exits_1(env, db, clicks, spend_fake):
    from conftest import run_lanner

    env = env | {"LANNER_META_API_URL": spend_fake.base}
    spend_fake.rows["meta"] = [clicks]
    created = run_lanner(
        env,
        *(
            "platform",
            "spend",
            "create",
            "fb-spend",
            "--platform",
            "meta",
            "--source",
            "FB",
            "--parameter",
            "ad",
        ),
        *(
            "--ad-account-id",
            f"act_{META_ACCOUNT}",
            "--access-token",
            META_SPEND_TOKEN,
            "--map",
            "2385001=demo",
        ),
    )
    assert (
        "access_token: ****" + META_SPEND_TOKEN[-4:] in created.stdout
        and META_SPEND_TOKEN not in created.stdout
    )
    synced = run_lanner(env, "platform", "spend", "sync", "fb-spend")
    assert "1 rows, 1 costs written, 0 unchanged" in synced.stdout and click_costs() == [2.1, 2.1]
    spend_fake.script(Scripted(503, b"", {"Retry-After": "30"}))
    failed = run_lanner(env, "platform", "spend", "sync", "fb-spend", check=False)
    assert failed.returncode == 1
    assert (
        "The sync failed: Meta answered 503 with an unexpected body:  It asked to wait 30 s" in failed.stderr
    )
    log = json.loads(run_lanner(env, "platform", "spend", "log", "fb-spend", "--json").stdout)
    assert [(row["state"], row["written"]) for row in log] == [("failed", 0), ("done", 1)]
    assert click_costs() == [2.1, 2.1]
