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
