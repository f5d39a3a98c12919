"""Per-node partial rows (migration 0036): each node's flusher adds onto its own partial of the rollup
and cap-counter rows; reports, caps and the cost rebuild read the partials as one number.

Two nodes' spools on one database of each backend (SQLite too: a node other than `main` writes a
partial of its own there as well); the numbers are checked against the raw clicks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from test_reports import cube_differences

from models.admin.services import create_campaign, create_offer, update_offer
from models.clicks.node import ensure_spool_node, partial_number
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.migrations.deferred import run_deferred
from models.reporting.costs import rebuild_click_costs, spread_cost
from models.reporting.reports import ReportQuery, run_report
from models.routing.caps import ClickCounters, cap_usage
from models.store.database import write_tx
from models.tables.dimensions import DAY_MS, HOUR_MS

AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.0 Mobile/15E148 Safari/604.1",
)
PER_NODE = 12
GROUPINGS = [("campaign",), ("offer", "browser"), ("hour", "device"), ("day", "offer", "os")]


def rows_of(report) -> list[dict]:
    return [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()} for row in report.rows]


def assert_reports_equal_raw(db, day: str, next_day: str) -> None:
    for group_by in GROUPINGS:
        shape = dict(group_by=group_by, since=day, until=next_day)
        fast, raw = run_report(db, ReportQuery(**shape)), run_report(db, ReportQuery(source="raw", **shape))
        assert "raw" not in fast.sources and raw.sources == ["raw"]
        assert rows_of(fast) == rows_of(raw), group_by
        assert fast.total == pytest.approx(raw.total)


def test_two_nodes_partials_add_up_in_reports_caps_and_a_cost_rebuild(
    db, settings, make_tracker, clock, tmp_path
):
    run_deferred(db)  # The rollup backfill of an empty database: reports read the rollups from here on.
    offer = create_offer(db, "Capped", "https://o.example/?s={subid}")
    update_offer(db, offer.id, daily_cap=1000)
    campaign = create_campaign(db, "Parts", "parts", offer_id=offer.id)
    other_spool = tmp_path / "node-b" / "spool"
    ensure_spool_node(other_spool, "node-b")
    trackers = [make_tracker(), make_tracker(spool_dir=other_spool)]  # `main` (partial 0) and node-b.
    for n, tracker in enumerate(trackers):
        config = tracker.campaign("parts")
        for i in range(PER_NODE):
            # The same visitors' keys on both nodes: both partials of the same rollup rows.
            tracker.track(config, Visit(ip=f"198.51.{n}.{i + 1}", user_agent=AGENTS[i % 2], cost=0.25))
    for spool in (settings.spool_dir, other_spool):
        flush_spool(db, spool, settings.spool_segment_bytes)

    assert all(rows == [] for rows in cube_differences(db).values())
    parts = dict(
        db.execute_sql(
            "SELECT node, SUM(clicks) FROM rollup_campaign_hour "
            f"WHERE campaign_id = {campaign.id:d} GROUP BY node"
        ).fetchall()
    )
    assert parts == {0: PER_NODE, partial_number("node-b"): PER_NODE}
    counted = dict(
        db.execute_sql(
            f"SELECT node, SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = {offer.id:d} "
            "GROUP BY node"
        ).fetchall()
    )
    assert counted == {0: PER_NODE, partial_number("node-b"): PER_NODE}

    # Caps read the partials as one count: today's and the total, and a web worker's starting counts.
    now_ms = int(clock() * 1000)
    assert cap_usage(db.connection(), "offer", offer.id, "UTC", now_ms) == (2 * PER_NODE, 2 * PER_NODE)
    counters = ClickCounters()
    counters.load(db.connection(), now_ms)
    assert [n for (scope, ref, _), n in counters.days.items() if (scope, ref) == ("offer", offer.id)] == [
        2 * PER_NODE
    ]
    assert not counters.is_capped("offer", offer.id, 2 * PER_NODE + 1, None, next(iter(counters.days))[2])
    assert counters.is_capped("offer", offer.id, 2 * PER_NODE, None, next(iter(counters.days))[2])

    day_ms = now_ms - now_ms % DAY_MS
    today = datetime.fromtimestamp(day_ms / 1000, UTC).date()
    dates = (today.isoformat(), (today + timedelta(days=1)).isoformat())
    assert_reports_equal_raw(db, *dates)
    assert run_report(db, ReportQuery(since=dates[0], until=dates[1])).total["cost"] == pytest.approx(
        2 * PER_NODE * 0.25
    )

    # A spread moves the rollups by differences (onto partial 0): still the raw numbers.
    spread_cost(db, campaign.id, day_ms, day_ms + DAY_MS, 6.0)
    assert_reports_equal_raw(db, *dates)
    # The rebuild puts a key's whole cost on its lowest partial and zeroes the others.
    hour = now_ms - now_ms % HOUR_MS
    db.execute_sql(f"UPDATE rollup_campaign_hour SET click_cost = 99 WHERE campaign_id = {campaign.id:d}")
    with write_tx(db):
        rebuild_click_costs(db.connection(), campaign.id, {hour})
    costs = db.execute_sql(
        "SELECT stream_id, offer_id, node, click_cost FROM rollup_campaign_hour "
        f"WHERE campaign_id = {campaign.id:d} ORDER BY stream_id, offer_id, node"
    ).fetchall()
    assert [(node, round(cost, 6)) for *_, node, cost in costs] == [(0, 6.0), (partial_number("node-b"), 0.0)]
    assert_reports_equal_raw(db, *dates)
