"""Click costs set by the spool flusher from the campaign's cost model; a URL's cost= wins."""

from __future__ import annotations

import pytest

from models.admin.services import create_campaign, update_campaign
from models.clicks.record import new_subid
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.reporting.costs import CostError, spread_cost
from models.tables.click import Click


def track(tracker, campaign_alias: str, ip: str, cost: float = 0.0) -> str:
    tracker.refresh()
    visit = Visit(ip=ip, user_agent="Mozilla/5.0 (X11) Firefox/120", cost=cost)
    return tracker.track(tracker.campaign(campaign_alias), visit).subid


def stored_costs(db, settings, subids: list[str]) -> list[float]:
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    costs = dict(db.execute_sql("SELECT subid, cost FROM click").fetchall())
    return [costs[subid] for subid in subids]


@pytest.mark.parametrize(
    ("model", "value", "expected"),
    [
        ("cpc", 0.05, [0.05, 0.05, 0.05, 1.25]),
        ("cpuc", 0.05, [0.05, 0.0, 0.05, 1.25]),  # The second click is the first visitor again.
        ("cpm", 2.0, [0.002, 0.002, 0.002, 1.25]),
        ("cpa", 3.0, [0.0, 0.0, 0.0, 1.25]),  # Costed on conversions, not clicks.
    ],
)
def test_click_costs_follow_the_campaign_model_and_a_url_cost_wins(
    db, settings, make_tracker, clock, model, value, expected
):
    create_campaign(db, "Paid", "paid", offer_url="https://o.example/?s={subid}")
    update_campaign(db, "paid", cost_model=model, cost_value=value)
    tracker = make_tracker(debounce_seconds=0)
    subids = [track(tracker, "paid", "198.51.100.1")]
    clock.advance(5)
    subids.append(track(tracker, "paid", "198.51.100.1"))
    subids.append(track(tracker, "paid", "198.51.100.2"))
    subids.append(track(tracker, "paid", "198.51.100.3", cost=1.25))
    assert stored_costs(db, settings, subids) == pytest.approx(expected)


def test_spreading_a_cost_replaces_the_period_s_click_costs_exactly(db, settings, make_tracker, clock):
    create_campaign(db, "Spend", "spend", offer_url="https://o.example/?s={subid}")
    tracker = make_tracker(debounce_seconds=0)
    subids = [track(tracker, "spend", f"198.51.100.{n}", cost=9.0) for n in range(1, 8)]
    stored_costs(db, settings, subids)
    start = int(clock() * 1000) - 1000
    clicks, per_click = spread_cost(db, 1, start, start + 60_000, 10.0)
    assert (clicks, per_click) == (7, pytest.approx(10 / 7, abs=1e-6))
    total = db.execute_sql("SELECT SUM(cost) FROM click").fetchone()[0]
    assert total == pytest.approx(10.0, abs=1e-9)
    with pytest.raises(CostError, match="no clicks"):
        spread_cost(db, 1, start - 10_000_000, start - 5_000_000, 5.0)


def test_cost_and_report_commands(lanner):
    import json

    lanner("generate", "clicks", "--count", "500", "--days", "2", "--campaigns", "2", "--seed", "4")
    lanner("db", "run-deferred")
    out = lanner(
        "cost", "set", "--campaign", "1", "--from", "2000-01-01", "--to", "2100-01-01", "--amount", "50"
    )
    assert "50 USD over" in out.stdout
    report = json.loads(lanner("report", "--preset", "all_time", "--json").stdout)
    assert report["total"]["clicks"] == 500
    assert report["total"]["cost"] == pytest.approx(50.0)
    assert report["sources"] == ["rollup_campaign_day"]
    csv_lines = lanner("report", "-g", "day", "--preset", "all_time", "--csv").stdout.splitlines()
    assert csv_lines[0].startswith("day,clicks,unique_clicks")
    table = lanner("report", "--preset", "all_time").stdout
    assert table.splitlines()[-1].startswith("total")
    refused = lanner("report", "-g", "planet", check=False)
    assert refused.returncode != 0 and "Cannot group or filter by 'planet'" in refused.stderr


def test_a_spread_cost_s_remainder_goes_to_the_last_click_by_time_then_id(db):
    # Clicks landed in one flush share their time: the same one takes the remainder on both dialects.
    create_campaign(db, "Spend", "spend", offer_url="https://o.example/?s={subid}")
    for created_at in (2_000, 1_000, 1_000, 1_000):
        Click.create(
            subid=new_subid(),
            created_at=created_at,
            campaign_id=1,
            ip="198.51.100.1",
            user_agent="t",
            ua_hash=1,
        )
    spread_cost(db, 1, 0, 1_500, 1.0)
    costs = [cost for (cost,) in db.execute_sql("SELECT cost FROM click ORDER BY id").fetchall()]
    assert costs == [0.0, 0.333333, 0.333333, 0.333334]


# -- scopes: a zone, a traffic source, bots, overlapping sets ---------------------------------------------

BOT_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
WIDE = ("--from", "2000-01-01", "--to", "2100-01-01")


def zone_clicks(db, settings, make_tracker, plan: dict[str, list[tuple[str, bool]]]) -> None:
    """Source Propeller (zoneid is sub_id_1, site sub_id_2) and its campaigns; `plan`: campaign alias ->
    [(zone, is_bot)], one click each from its own visitor."""
    from models.admin.sources import create_source

    create_source(db, "Propeller", "zoneid={zoneid}&site={site}&cost={cost}")
    for alias in plan:
        offer_url = "https://o.example/?s={subid}"
        create_campaign(db, alias.title(), alias, offer_url=offer_url, source="Propeller")
    tracker = make_tracker(debounce_seconds=0)
    tracker.refresh()
    n = 0
    for alias, clicks in plan.items():
        for zone, is_bot in clicks:
            n += 1
            sub_ids = [""] * 30
            sub_ids[0], sub_ids[1] = zone, "site-a"
            agent = BOT_UA if is_bot else f"Mozilla/5.0 (X11) Firefox/{100 + n}"
            visit = Visit(ip=f"198.51.{n // 250}.{n % 250 + 1}", user_agent=agent, sub_ids=sub_ids)
            tracker.track(tracker.campaign(alias), visit)
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    run_deferred_rollups(db)


def run_deferred_rollups(db) -> None:
    from models.migrations.deferred import run_deferred

    run_deferred(db)


def costs_by(db, column: str) -> dict:
    rows = db.execute_sql(f"SELECT {column}, is_bot, cost FROM click ORDER BY id").fetchall()
    found: dict = {}
    for value, is_bot, cost in rows:
        found.setdefault((value, bool(is_bot)), []).append(cost)
    return found


def report_json(lanner, *args: str) -> dict:
    import json

    return json.loads(lanner("report", "--preset", "all_time", "--json", *args).stdout)


def test_a_zone_cost_goes_to_that_zone_s_clicks_only_and_bots_get_none(db, settings, make_tracker, lanner):
    zone_clicks(db, settings, make_tracker, {"north": [("111", False)] * 3 + [("111", True), ("222", False)]})
    assert {is_bot for (_, is_bot) in costs_by(db, "sub_id_1")} == {False, True}  # The bot was seen as one.
    zone = ("--sub-id", "zoneid=111")
    out = lanner("cost", "set", "--campaign", "north", *WIDE, "--amount", "10", *zone).stdout
    assert "10 USD over 3 clicks (3.33333 USD each); 1 bot clicks at 0." in out
    costs = costs_by(db, "sub_id_1")
    assert costs[("111", False)] == [3.333333, 3.333333, 3.333334]
    assert costs[("111", True)] == [0.0] and costs[("222", False)] == [0.0]
    by_zone = report_json(lanner, "-g", "zoneid", "-f", "campaign=north")
    rows = {row["zoneid"]: row for row in by_zone["rows"]}
    assert rows["111"]["cost"] == pytest.approx(10.0, abs=1e-9) and rows["222"]["cost"] == 0
    assert rows["111"]["profit"] == pytest.approx(-10.0, abs=1e-9) and rows["111"]["roi"] == -100
    assert report_json(lanner)["total"]["cost"] == pytest.approx(10.0, abs=1e-9)  # The rollups moved too.
    # The raw slot name and a second value narrow it further; the bots are charged when asked.
    out = lanner(
        "cost",
        "set",
        "--campaign",
        "north",
        *WIDE,
        "--amount",
        "4",
        "--sub-id",
        "sub_id_1=111",
        "--sub-id",
        "site=site-a",
        "--include-bots",
    ).stdout
    assert "4 USD over 4 clicks (1 USD each)." in out
    assert costs_by(db, "sub_id_1")[("111", True)] == [1.0]
    assert report_json(lanner)["total"]["cost"] == pytest.approx(4.0, abs=1e-9)


def test_a_source_cost_is_spread_over_all_its_campaigns_clicks(db, settings, make_tracker, lanner):
    zone_clicks(
        db,
        settings,
        make_tracker,
        {
            "north": [("1", False)] * 3,
            "south": [("1", False), ("2", False), ("2", True)],
            "west": [],
        },
    )
    out = lanner("cost", "set", "--source", "Propeller", *WIDE, "--amount", "50").stdout
    assert "50 USD over 5 clicks (10 USD each); 1 bot clicks at 0." in out
    by_campaign = {row["campaign"]: row["cost"] for row in report_json(lanner, "-g", "campaign")["rows"]}
    assert by_campaign == {1: pytest.approx(30.0), 2: pytest.approx(20.0)}
    lanner(
        "cost",
        "set",
        "--source",
        "Propeller",
        *WIDE,
        "--amount",
        "9",
        "--sub-id",
        "zoneid=2",
        "--include-bots",
    )
    by_zone = {row["zoneid"]: row["cost"] for row in report_json(lanner, "-g", "zoneid")["rows"]}
    assert by_zone == {"1": pytest.approx(40.0), "2": pytest.approx(9.0)}
    listed = __import__("json").loads(lanner("cost", "list", "--json").stdout)
    assert [(e["scope"], e["filters"], e["amount"]) for e in listed] == [
        ("source 1", {"sub_id_1": "2"}, 9.0),
        ("source 1", {}, 50.0),
    ]
    refused = lanner(
        "cost", "set", "--source", "Propeller", *WIDE, "--amount", "1", "--sub-id", "zone=1", check=False
    )
    assert refused.returncode == 1
    assert "'zone' is neither sub_id_1 … sub_id_30, source, nor a parameter of the traffic source's" in (
        refused.stderr
    )
    refused = lanner("cost", "set", *WIDE, "--amount", "1", check=False)
    assert refused.returncode == 2 and "Give --campaign or --source" in refused.stderr


def test_a_later_set_replaces_the_overlap_and_a_zone_set_replaces_the_zone_s_share(
    db, settings, make_tracker, lanner
):
    zone_clicks(db, settings, make_tracker, {"north": [("1", False)] * 2 + [("2", False)] * 2})
    lanner("cost", "set", "--campaign", "north", *WIDE, "--amount", "100")
    lanner("cost", "set", "--campaign", "north", *WIDE, "--amount", "100")  # The same again: no double.
    assert report_json(lanner)["total"]["cost"] == pytest.approx(100.0, abs=1e-9)
    lanner("cost", "set", "--campaign", "north", *WIDE, "--amount", "7.77", "--sub-id", "zoneid=2")
    by_zone = {row["zoneid"]: row["cost"] for row in report_json(lanner, "-g", "zoneid")["rows"]}
    assert by_zone == {"1": pytest.approx(50.0, abs=1e-9), "2": pytest.approx(7.77, abs=1e-9)}
    total = report_json(lanner)["total"]["cost"]
    assert round(total, 2) == 57.77 and total == pytest.approx(57.77, abs=1e-9)  # 100 - 50 + 7.77
    listed = __import__("json").loads(lanner("cost", "list", "--campaign", "north", "--json").stdout)
    assert [(e["filters"], e["amount"]) for e in listed] == [({"sub_id_1": "2"}, 7.77), ({}, 100.0)]
    # The campaign set again over a range covering both: it replaces both, zone 2's share included.
    wider = ("--from", "1999-01-01", "--to", "2100-01-01")
    lanner("cost", "set", "--campaign", "north", *wider, "--amount", "1")
    assert report_json(lanner)["total"]["cost"] == pytest.approx(1.0, abs=1e-9)
    listed = __import__("json").loads(lanner("cost", "list", "--json").stdout)
    assert [(e["filters"], e["amount"], e["since"]) for e in listed] == [({}, 1.0, "1999-01-01")]
    table = lanner("cost", "list").stdout.splitlines()
    assert table[0].split()[:3] == ["id", "scope", "filters"] and "campaign 1" in table[1]


def test_cents_add_up_when_a_spend_does_not_divide_evenly(db, settings, make_tracker, lanner):
    zone_clicks(db, settings, make_tracker, {"north": [("1", False)] * 7, "south": [("1", False)] * 4})
    lanner("cost", "set", "--source", "Propeller", *WIDE, "--amount", "100.01")
    costs = [cost for ((_, _), values) in costs_by(db, "sub_id_1").items() for cost in values]
    assert sorted(costs) == [9.091818] * 9 + [9.091819] * 2  # 100,010,000 micro-units over 11: 2 left.
    assert sum(round(c * 1_000_000) for c in costs) == 100_010_000
    report = report_json(lanner, "-g", "campaign")
    assert round(report["total"]["cost"], 2) == 100.01
    assert round(sum(row["cost"] for row in report["rows"]), 2) == 100.01


def test_a_zone_cost_in_another_currency_is_converted_as_campaign_costs_are(
    db, settings, make_tracker, lanner
):
    from models.reporting.currency import set_rates

    zone_clicks(db, settings, make_tracker, {"north": [("1", False), ("1", False), ("2", False)]})
    refused = lanner(
        "cost",
        "set",
        "--campaign",
        "north",
        *WIDE,
        "--amount",
        "10",
        "--currency",
        "EUR",
        "--sub-id",
        "zoneid=1",
        check=False,
    )
    assert refused.returncode == 1 and "There is no exchange rate for EUR" in refused.stderr
    set_rates(db, {"EUR": "1.1"})
    out = lanner(
        "cost",
        "set",
        "--campaign",
        "north",
        *WIDE,
        "--amount",
        "10",
        "--currency",
        "EUR",
        "--sub-id",
        "zoneid=1",
    ).stdout
    assert "10 EUR (11 USD) over 2 clicks (5.5 USD each)." in out
    by_zone = {row["zoneid"]: row["cost"] for row in report_json(lanner, "-g", "zoneid")["rows"]}
    assert by_zone == {"1": pytest.approx(11.0, abs=1e-9), "2": 0}
    (entry,) = __import__("json").loads(lanner("cost", "list", "--json").stdout)
    assert (entry["amount"], entry["currency"], entry["report_amount"]) == (10.0, "EUR", 11.0)


def test_clicks_landing_between_the_chunks_of_a_spread_keep_their_cost_and_the_rollups_stay_exact(
    db, settings, make_tracker, clock
):
    from models.reporting.costs import cost_request, cost_scope, set_cost
    from models.tables.campaign import Campaign

    zone_clicks(db, settings, make_tracker, {"north": [("1", False)] * 40 + [("1", True)] * 3})
    update_campaign(db, "north", cost_model="cpc", cost_value=0.5)
    tracker = make_tracker(debounce_seconds=0)
    landed = []

    def flush_between_chunks(done: int, total: int) -> None:  # The flusher's turn between two chunks.
        tracker.refresh()
        sub_ids = ["1", *[""] * 29]
        visit = Visit(ip=f"203.0.113.{done // 10}", user_agent=f"Mozilla/5.0 Firefox/{done}", sub_ids=sub_ids)
        landed.append(tracker.track(tracker.campaign("north"), visit).subid)
        flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)

    scope = cost_scope(db, campaign=Campaign.get_by_id(1), sub_ids=[("zoneid", "1")])
    request = cost_request(db, scope, "2000-01-01", "2100-01-01", 20.0)
    spread = set_cost(db, request, on_progress=flush_between_chunks, chunk_size=10)
    assert (spread.clicks, spread.unpaid_clicks, len(landed)) == (40, 3, 5)
    costs = dict(db.execute_sql("SELECT subid, cost FROM click").fetchall())
    assert [costs[subid] for subid in landed] == [0.5] * 5  # Not in the period's clicks as it was read.
    raw = db.execute_sql("SELECT COUNT(*), SUM(cost) FROM click").fetchone()
    for table in ("rollup_campaign_hour", "rollup_campaign_day", "rollup_hour", "rollup_day"):
        rolled = db.execute_sql(f"SELECT SUM(clicks), SUM(click_cost) FROM {table}").fetchone()
        assert rolled[0] == raw[0] == 48 and rolled[1] == pytest.approx(raw[1], abs=1e-9) == 22.5


def test_unique_only_spreads_over_first_clicks_and_repeats_get_none(
    db, settings, make_tracker, clock, lanner
):
    create_campaign(db, "Spend", "spend", offer_url="https://o.example/?s={subid}")
    tracker = make_tracker(debounce_seconds=0)
    subids = [track(tracker, "spend", "198.51.100.1", cost=1.0)]
    clock.advance(5)
    subids += [track(tracker, "spend", "198.51.100.1", cost=1.0), track(tracker, "spend", "198.51.100.2")]
    stored_costs(db, settings, subids)
    out = lanner("cost", "set", "--campaign", "spend", *WIDE, "--amount", "9", "--unique-only").stdout
    assert "9 USD over 2 clicks (4.5 USD each); 1 bot or repeat clicks at 0." in out
    assert stored_costs(db, settings, subids) == [4.5, 0.0, 4.5]
    (entry,) = __import__("json").loads(lanner("cost", "list", "--json").stdout)
    assert entry["is_unique_only"] is True and entry["unpaid_clicks"] == 1
