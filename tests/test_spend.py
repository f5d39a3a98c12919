"""Spend pulled from traffic sources (issue 30, point 2): Meta's ad insights, PropellerAds' statistics and
TikTok's reports, read from local fakes that enforce each contract (tests/spend_fakes.py), mapped onto
campaigns and a click parameter, and written as cost sets the reports read; idempotent over a re-read
window; every platform failure logged, nothing written twice.
"""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime

import pytest
from platform_fakes import Scripted
from spend_fakes import (
    META_ACCOUNT,
    META_SPEND_TOKEN,
    PROPELLER_TOKEN,
    TIKTOK_ADVERTISER,
    TIKTOK_SPEND_TOKEN,
    SpendFake,
)

DAY = "2026-12-03"
NOON = datetime(2026, 12, 4, 12, tzinfo=UTC).timestamp()  # "Now": the window is 11-30 … 12-04.


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
def config(spend_fake):
    from models.reporting.spend.fetch import http_get
    from models.reporting.spend.sync import SpendConfig

    def get(url, headers, **request):
        return http_get(url, headers, timeout=2.0, **request)

    base = spend_fake.base
    return SpendConfig({"meta": base, "tiktok": base, "propellerads": base}, 5, get)


@pytest.fixture
def campaign(db):
    from models.admin.services import create_campaign
    from models.admin.sources import create_source

    create_source(db, "FB", "ad={ad_id}&zone={zoneid}")
    return create_campaign(db, "Demo", "demo", offer_url="https://o.example/?s={subid}", source="FB")


def add_clicks(campaign, day: str, ad: str, count: int, *, zone: str = "", bots: int = 0) -> list[int]:
    from models.clicks.record import new_subid
    from models.tables.click import Click

    ids = []
    start = int(datetime.fromisoformat(day).replace(hour=10, tzinfo=UTC).timestamp() * 1000)
    for n in range(count + bots):
        row = Click.create(
            subid=new_subid(),
            created_at=start + n * 1000,
            campaign_id=campaign.id,
            stream_id=None,
            offer_id=None,
            ip="203.0.113.7",
            user_agent="Mozilla/5.0",
            ua_hash=zlib.crc32(b"Mozilla/5.0"),
            country="DE",
            is_bot=int(n >= count),
            sub_id_1=ad,
            sub_id_2=zone,
        )
        ids.append(row.id)
    return ids


def costs(ids: list[int]) -> list[float]:
    from models.tables.click import Click

    rows = dict(Click.select(Click.id, Click.cost).where(Click.id.in_(ids)).tuples())
    return [rows[i] for i in ids]


def entries() -> list[dict]:
    from models.store.costs import CostStore
    from models.store.database import db

    return CostStore(db.connection()).entries()


def meta_row(ad: str, spend: str, day: str = DAY, campaign: str = "2385001", currency: str = "USD") -> dict:
    return {
        "date_start": day,
        "date_stop": day,
        "ad_id": ad,
        "adset_id": "2384001",
        "campaign_id": campaign,
        "spend": spend,
        "account_currency": currency,
    }


def meta_connection(db, **options):
    from models.reporting.spend.connections import create_spend_connection, map_ids

    given = {"ad_account_id": f"act_{META_ACCOUNT}", "access_token": META_SPEND_TOKEN}
    view = create_spend_connection(
        db, "fb-spend", "meta", source="FB", credentials=given, parameter=options.pop("parameter", "ad")
    )
    map_ids(db, view.name, {"2385001": "demo"})
    return view


def sync(db, config, view, now: float = NOON):
    from models.accounts.principal import CLI
    from models.reporting.spend.sync import sync_connection

    return sync_connection(db, view.id, config, actor=CLI, clock=lambda: now)


def test_meta_spend_lands_on_each_ads_clicks_and_a_second_run_changes_nothing(
    db, campaign, spend_fake, config
):
    from models.reporting.costs import cost_request, cost_scope, set_cost

    first = add_clicks(campaign, DAY, "A1", 3, bots=1)
    second = add_clicks(campaign, DAY, "A2", 2)
    typed = add_clicks(campaign, "2026-12-01", "A9", 2)
    # A cost typed by hand, on a day and ad the platform reports nothing for: never touched by a sync.
    scope = cost_scope(db, campaign=campaign, sub_ids=[("ad", "A9")])
    set_cost(db, cost_request(db, scope, "2026-12-01", "2026-12-01", 5.0))
    view = meta_connection(db)
    spend_fake.rows["meta"] = [meta_row("A1", "3.00"), meta_row("A2", "1.50")]

    run = sync(db, config, view)
    assert (run.state, run.rows, run.written, run.skipped, run.error) == ("done", 2, 2, 0, "")
    assert costs(first) == [1.0, 1.0, 1.0, 0.0] and costs(second) == [0.75, 0.75]
    written = entries()
    assert [(e["label"], e["amount"], e["spend_connection_id"]) for e in written] == [
        ("ad=A9", 5.0, None),
        ("ad=A1", 3.0, view.id),
        ("ad=A2", 1.5, view.id),
    ]
    path = spend_fake.paths[0]
    assert "access_token" not in path and "level=ad" in path and "time_increment=1" in path

    again = sync(db, config, view)
    assert (again.written, again.unchanged, again.removed) == (0, 2, 0)
    assert entries() == written and costs(first) == [1.0, 1.0, 1.0, 0.0]

    # The platform corrects A1 and no longer reports A2: A1's set is replaced, A2's clicks cost 0 again.
    spend_fake.rows["meta"] = [meta_row("A1", "6.00")]
    third = sync(db, config, view)
    assert (third.written, third.unchanged, third.removed) == (1, 0, 1)
    assert costs(first) == [2.0, 2.0, 2.0, 0.0] and costs(second) == [0.0, 0.0]
    assert [(e["label"], e["amount"]) for e in entries()] == [("ad=A9", 5.0), ("ad=A1", 6.0)]
    assert costs(typed) == [2.5, 2.5]


def test_rows_of_unknown_campaigns_or_ads_are_skipped_and_counted_in_one_sentence(
    db, campaign, spend_fake, config
):
    add_clicks(campaign, DAY, "A1", 2)
    add_clicks(campaign, "2026-12-02", "A3", 1)
    view = meta_connection(db)
    # 1,200 rows of a campaign mapped to none: three pages of 500, each read.
    spend_fake.rows["meta"] = [meta_row(f"X{n}", "0.10", campaign="999") for n in range(1200)]
    spend_fake.rows["meta"] += [meta_row("A1", "2.00"), meta_row("A-none", "1.00")]
    spend_fake.rows["meta"] += [meta_row("A3", "1.00", day="2026-12-02", currency="EUR")]
    run = sync(db, config, view)
    assert (run.state, run.rows, run.written, run.skipped) == ("done", 1203, 2, 1201)
    assert len(spend_fake.paths) == 3
    assert run.note == (
        "Skipped 1,200 rows (120.00 of spend) of campaigns mapped to none of Lanner's (999); "
        "1 row with no clicks with their ad or zone id in Lanner that day. "
        "Written waiting for an exchange rate, their cost left out of reports until one is set: 1 row in EUR."
    )


@pytest.mark.parametrize(
    "answer, error",
    [
        (Scripted(500, b"<html>oops</html>"), "Meta answered 500 with an unexpected body: <html>oops</html>"),
        (Scripted(200, b"{not json"), "Meta answered 200 with an unexpected body: {not json"),
        (
            Scripted(
                429,
                b'{"error": {"message": "User request limit reached", "code": 17}}',
                {"Retry-After": "120"},
            ),
            "Meta answered 429: User request limit reached (code 17). It asked to wait 120 s;",
        ),
        (Scripted(200, b"{}", hang=4.0), "Meta did not answer: The request failed: timed out."),
    ],
)
def test_a_failing_platform_writes_nothing_and_the_log_says_why(
    db, campaign, spend_fake, config, answer, error
):
    ids = add_clicks(campaign, DAY, "A1", 2)
    view = meta_connection(db)
    spend_fake.rows["meta"] = [meta_row("A1", "2.00")]
    sync(db, config, view)
    spend_fake.rows["meta"] = [meta_row("A1", "9.00")]
    spend_fake.script(answer)
    run = sync(db, config, view)
    assert (run.state, run.written, run.removed) == ("failed", 0, 0)
    assert run.error.startswith(error.split(" The next")[0]) and costs(ids) == [1.0, 1.0]
    assert len(entries()) == 1
    assert sync(db, config, view).written == 1 and costs(ids) == [4.5, 4.5]


def test_a_bad_token_and_a_second_page_failing_change_nothing(db, campaign, spend_fake, config):
    from models.reporting.spend.connections import change_spend_connection

    ids = add_clicks(campaign, DAY, "A1", 2)
    view = meta_connection(db)
    change_spend_connection(db, view.name, credentials={"access_token": "EAAB-wrong-token-000000"})
    spend_fake.rows["meta"] = [meta_row("A1", "2.00")] + [
        meta_row(f"X{n}", "1", campaign="9") for n in range(600)
    ]
    run = sync(db, config, view)
    assert run.state == "failed"
    assert (
        run.error == "Meta answered 400: Invalid OAuth access token - Cannot parse access token (code 190)."
    )
    change_spend_connection(db, view.name, credentials={"access_token": META_SPEND_TOKEN})
    spend_fake.script(
        Scripted(
            200,
            json.dumps(
                {
                    "data": [meta_row("A1", "2.00")],
                    "paging": {"cursors": {"after": "NTAw"}, "next": "https://x"},
                }
            ).encode(),
        ),
        Scripted(502, b"bad gateway"),
    )
    assert sync(db, config, view).state == "failed" and costs(ids) == [0.0, 0.0] and entries() == []


def test_propellerads_zone_spend_lands_on_each_zones_clicks(db, campaign, spend_fake, config):
    from models.reporting.spend.connections import create_spend_connection, map_ids

    z1 = add_clicks(campaign, DAY, "", 4, zone="4417")
    z2 = add_clicks(campaign, DAY, "", 1, zone="5520")
    view = create_spend_connection(
        db, "pa", "propellerads", source="FB", credentials={"api_token": PROPELLER_TOKEN}, parameter="zone"
    )
    map_ids(db, "pa", {"7001": "demo"})
    spend_fake.rows["propellerads"] = [
        {"date_time": DAY, "campaign_id": 7001, "zone_id": 4417, "spent": 2.0, "impressions": 900},
        {"date_time": DAY, "campaign_id": 7001, "zone_id": 5520, "spent": "0.35", "impressions": 90},
        {"date_time": DAY, "campaign_id": 7001, "zone_id": 6000, "spent": 1.0, "impressions": 9},
    ]
    run = sync(db, config, view)
    assert (run.written, run.skipped) == (2, 1) and costs(z1) == [0.5] * 4 and costs(z2) == [0.35]
    assert "day_from=2026-11-30+00%3A00%3A00" in spend_fake.paths[0]
    assert sync(db, config, view).unchanged == 2
    spend_fake.script(Scripted(401, b'{"message": "Unauthenticated."}'))
    assert sync(db, config, view).error == "PropellerAds answered 401: Unauthenticated."


def test_tiktok_ad_spend_is_read_page_by_page_and_an_error_code_is_logged(db, campaign, spend_fake, config):
    from models.reporting.spend import tiktok
    from models.reporting.spend.connections import create_spend_connection, map_ids

    ids = add_clicks(campaign, DAY, "T1", 2)
    view = create_spend_connection(
        db,
        "tt",
        "tiktok",
        source="FB",
        credentials={"advertiser_id": TIKTOK_ADVERTISER, "access_token": TIKTOK_SPEND_TOKEN},
        parameter="ad",
    )
    map_ids(db, "tt", {"1790": "demo"})

    def row(ad: str, spend: str, campaign_id: str = "1790") -> dict:
        metrics = {"spend": spend, "campaign_id": campaign_id, "adgroup_id": "1780", "currency": "USD"}
        return {"dimensions": {"stat_time_day": f"{DAY} 00:00:00", "ad_id": ad}, "metrics": metrics}

    spend_fake.rows["tiktok"] = [row(f"U{n}", "1.00", "1") for n in range(tiktok.PAGE_SIZE)] + [
        row("T1", "3.00")
    ]
    run = sync(db, config, view)
    assert (run.rows, run.written, run.skipped, len(spend_fake.paths)) == (1001, 1, 1000, 2)
    assert costs(ids) == [1.5, 1.5]
    spend_fake.script(Scripted(200, b'{"code": 40100, "message": "Too many requests.", "data": {}}'))
    failed = sync(db, config, view)
    assert failed.error == "TikTok refused the report: Too many requests. (code 40100)." and costs(ids) == [
        1.5,
        1.5,
    ]


def test_bad_spend_connections_are_refused_with_one_sentence(db, campaign):
    from models.admin.errors import AdminError
    from models.reporting.spend.connections import create_spend_connection

    def refused(**options) -> str:
        given = {"name": "x", "platform": "meta", "source": "FB", "parameter": ""}
        given |= {"credentials": {"ad_account_id": "act_1", "access_token": "t"}} | options
        with pytest.raises(AdminError) as caught:
            create_spend_connection(db, given.pop("name"), given.pop("platform"), **given)
        return str(caught.value)

    assert (
        refused(platform="google_ads") == "Spend is pulled from meta, propellerads, tiktok, not 'google_ads'."
    )
    assert refused(credentials={"access_token": "t"}) == "A meta spend connection needs its ad_account_id."
    assert refused(credentials={"ad_account_id": "me", "access_token": "t"}).startswith(
        "The Meta ad_account_id"
    )
    assert refused(parameter="nope").startswith("'nope' is neither a parameter of traffic source 'FB'")
    assert refused(source="nope") == "There is no traffic source 'nope'."
    assert refused(timezone="Mars/Base").startswith("Unknown timezone 'Mars/Base'")


def test_a_source_with_a_live_spend_connection_is_not_deleted_and_a_removed_one_lets_go(db, campaign):
    from models.admin.errors import AdminConflict
    from models.admin.sources import create_source, delete_source
    from models.reporting.spend.connections import (
        create_spend_connection,
        get_spend_connection,
        remove_spend_connection,
    )

    create_source(db, "Push", "zone={zoneid}")
    given = {"api_token": PROPELLER_TOKEN}
    create_spend_connection(db, "pa", "propellerads", source="Push", credentials=given, parameter="zone")
    with pytest.raises(AdminConflict) as refused:
        delete_source(db, "Push")
    assert str(refused.value) == (
        "Traffic source 'Push' has its spend pulled by spend connection pa: remove it first "
        "(`lanner platform spend remove`)."
    )
    remove_spend_connection(db, "pa")
    delete_source(db, "Push")
    assert get_spend_connection(db, "pa").source == ""


def test_the_periodic_task_syncs_each_active_connection_and_logs_a_failure_in_one_line(
    db, env, campaign, spend_fake, caplog
):
    import time

    from models.reporting.spend.connections import create_spend_connection, set_spend_status, sync_log
    from settings import load_settings
    from workers.runtime.tasks import create_huey

    today = datetime.fromtimestamp(time.time() - 60, UTC).date().isoformat()
    ids = add_clicks(campaign, today, "A1", 2)
    meta_connection(db)
    given = {"api_token": PROPELLER_TOKEN}
    create_spend_connection(db, "pa", "propellerads", source="FB", credentials=given, parameter="zone")
    set_spend_status(db, "pa", "paused")
    create_spend_connection(
        db, "pa2", "propellerads", source="FB", credentials=given | {"api_token": "x" * 20}
    )
    spend_fake.rows["meta"] = [meta_row("A1", "1.00", day=today)]
    urls = {"LANNER_META_API_URL": spend_fake.base, "LANNER_PROPELLERADS_API_URL": spend_fake.base}
    assert not hasattr(
        create_huey(load_settings(env | urls | {"LANNER_SPEND_SYNC_MINUTES": "0"})), "sync_spend"
    )
    create_huey(
        load_settings(env | urls), immediate=True
    ).sync_spend()  # The periodic task, as the consumer runs it.
    assert [row["state"] for row in sync_log(db, "fb-spend")] == ["done"] and costs(ids) == [0.5, 0.5]
    assert sync_log(db, "pa") == []
    assert [row["error"] for row in sync_log(db, "pa2")] == ["PropellerAds answered 401: Unauthenticated."]
    assert "spend of pa2 not synced: PropellerAds answered 401: Unauthenticated." in caplog.text


def test_an_ads_day_in_two_currencies_is_skipped_whole_and_the_rest_is_written(
    db, campaign, spend_fake, config
):
    ids = add_clicks(campaign, DAY, "A1", 2)
    other = add_clicks(campaign, DAY, "A2", 1)
    view = meta_connection(db)
    spend_fake.rows["meta"] = [
        meta_row("A1", "1.00"),
        meta_row("A1", "2.00", currency="EUR"),
        meta_row("A1", "3.00"),
        meta_row("A2", "0.40"),
    ]
    run = sync(db, config, view)
    assert (run.written, run.skipped) == (1, 3) and costs(ids) == [0.0, 0.0] and costs(other) == [0.4]
    assert run.note == "Skipped 3 rows of one ad or zone and day in two currencies."


def test_the_fake_refuses_what_each_platform_refuses(spend_fake):
    """The fake is no stand-in that takes anything: each documented refusal, asked for directly."""
    from models.reporting.spend import meta, propellerads, tiktok
    from models.reporting.spend.fetch import http_get

    good = {"ad_account_id": META_ACCOUNT, "access_token": META_SPEND_TOKEN}
    bearer = {"Authorization": f"Bearer {META_SPEND_TOKEN}"}
    url = meta.url(good, "2026-12-01", "2026-12-03", spend_fake.base)
    assert http_get(url, bearer).code == 200
    for broken, code in [
        (url.replace("time_increment=1", "time_increment=7"), 100),
        (url.replace("ad_id%2C", ""), 100),
        (url + f"&access_token={META_SPEND_TOKEN}", 100),
        (url.replace("2026-12-03", "2026-11-03"), 100),
    ]:
        reply = http_get(broken, bearer)
        assert (reply.code, json.loads(reply.body)["error"]["code"]) == (400, code), broken
    assert json.loads(http_get(url, {"Authorization": "Bearer nope"}).body)["error"]["code"] == 190

    tt = {"advertiser_id": TIKTOK_ADVERTISER, "access_token": TIKTOK_SPEND_TOKEN}
    page = tiktok.url(tt, "2026-12-01", "2026-12-03", spend_fake.base, 1)
    token = {"Access-Token": TIKTOK_SPEND_TOKEN}
    assert json.loads(http_get(page, token).body)["code"] == 0
    for broken in (page.replace("page_size=1000", "page_size=1001"), page.replace("BASIC", "AUDIENCE")):
        reply = http_get(broken, token)
        assert (reply.code, json.loads(reply.body)["code"]) == (200, 40002)
    assert json.loads(http_get(page, {"Access-Token": "nope"}).body)["code"] == 40105

    stats = propellerads.url("2026-12-01", "2026-12-03", spend_fake.base)
    auth = {"Authorization": f"Bearer {PROPELLER_TOKEN}"}
    assert http_get(stats, auth).code == 200
    assert http_get(stats.replace("group_by%5B%5D=zone_id&", ""), auth).code == 422
    assert http_get(stats.replace("+00%3A00%3A00", ""), auth).code == 422
    assert http_get(stats, {"Authorization": "Bearer nope"}).code == 401


def test_a_429s_retry_after_keeps_the_periodic_sync_off_that_connection_until_then(
    db, campaign, spend_fake, config
):
    from models.accounts.principal import CLI
    from models.reporting.spend.connections import sync_active
    from models.tables.spend import SpendConnection, SpendSync

    ids = add_clicks(campaign, DAY, "A1", 2)
    view = meta_connection(db)
    spend_fake.rows["meta"] = [meta_row("A1", "2.00")]
    spend_fake.script(
        Scripted(
            429, b'{"error": {"message": "User request limit reached", "code": 17}}', {"Retry-After": "120"}
        )
    )

    def periodic(at: float) -> list[str]:
        return [run["state"] for run in sync_active(db, config, actor=CLI, clock=lambda: at)]

    assert periodic(NOON) == ["failed"]
    waits = SpendConnection.get_by_id(view.id).retry_after_at
    assert waits == int(NOON * 1000) + 120_000
    until = datetime.fromtimestamp(NOON + 120, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert SpendSync.select().count() == 1 and f"the periodic sync waits until {until}" in (
        SpendSync.get().error
    )
    asked = len(spend_fake.paths)
    # A round before then leaves it alone: no run, no request to the platform.
    assert periodic(NOON + 119) == [] and len(spend_fake.paths) == asked and SpendSync.select().count() == 1
    # Then it runs again, and a run that ends otherwise waits for nothing any more.
    assert periodic(NOON + 120) == ["done"] and costs(ids) == [1.0, 1.0]
    assert SpendConnection.get_by_id(view.id).retry_after_at is None


def test_a_long_window_is_read_through_a_meta_report_job_and_a_failed_job_writes_nothing(
    db, campaign, spend_fake, config
):
    import dataclasses

    from models.reporting.spend import meta

    ids = add_clicks(campaign, DAY, "A1", 2)
    view = meta_connection(db)
    spend_fake.rows["meta"] = [meta_row("A1", "2.00")]
    backfill = dataclasses.replace(config, window_days=meta.ASYNC_AFTER_DAYS + 3)
    run = sync(db, backfill, view)
    assert (run.state, run.written, run.error) == ("done", 1, "") and costs(ids) == [1.0, 1.0]
    # One job, asked about until it completed (twice running), then its rows read from its /insights edge.
    job = next(iter(spend_fake.jobs))
    assert spend_fake.paths[0] == f"POST /{meta.API_VERSION}/act_{META_ACCOUNT}/insights"
    assert spend_fake.paths[1:4] == [f"/{meta.API_VERSION}/{job}"] * 3
    assert spend_fake.paths[4].startswith(f"/{meta.API_VERSION}/{job}/insights?")
    assert sync(db, config, view).unchanged == 1  # The usual window: one synchronous request, no job.
    assert len(spend_fake.jobs) == 1

    spend_fake.rows["meta"] = [meta_row("A1", "9.00")]
    spend_fake.job_end = "Job Failed"
    failed = sync(db, backfill, view)
    assert failed.state == "failed" and "ended 'Job Failed'; the next run asks again." in failed.error
    assert costs(ids) == [1.0, 1.0]
