"""Costs in a currency with no exchange rate wait in that currency (migration 0034), named per report row,
and count at the click day's rate once one is stored: in the rollups, the raw rows and the columnar history
alike, on both backends.
"""

from __future__ import annotations

import pytest

from models.admin.services import create_campaign, update_campaign
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.migrations.deferred import run_deferred
from models.reporting.costs import CostRequest, CostScope, set_costs_together
from models.reporting.currency import day_of, set_rates, store_fetched
from models.reporting.history import HistoryFiles, append_history
from models.reporting.reports import ReportQuery, run_report
from models.store.costs import CostStore
from models.store.database import write_tx
from models.tables.dimensions import DAY_MS

DAY_S = 86_400


def reports(db, settings, **query) -> dict:
    """The same report from the rollups, the raw rows and the columnar history (appended first): each
    must give the same rows and total, which this returns (the rollups')."""
    files = HistoryFiles.of(settings)
    append_history(db, files)
    made = {
        source: run_report(db, ReportQuery(preset="all_time", source=source, **query), history=files)
        for source in ("auto", "raw", "history")
    }
    fast = made["auto"]
    for source in ("raw", "history"):
        assert (made[source].rows, made[source].total) == (fast.rows, fast.total), source
    return {"rows": fast.rows, "total": fast.total, "notes": fast.notes}


def waiting(db) -> list[tuple]:
    return sorted(db.execute_sql("SELECT currency, amount FROM unrated_cost").fetchall())


def note(count: int, code: str, amount: float, days: list[str]) -> str:
    return (
        f"{count} click{'s' if count != 1 else ''} with a cost without an exchange rate into USD, not in "
        f"cost, profit or ROI until one is set: {count} in {code} (cost {amount:g} {code}) on "
        f"{', '.join(days)} (UTC days)."
    )


def test_click_costs_without_a_rate_wait_named_per_row_then_count_at_each_click_days_rate(
    db, settings, make_tracker, clock
):
    run_deferred(db)  # An empty database: the rollups are live from the start.
    create_campaign(db, "Swiss", "swiss", offer_url="https://o.example/?s={subid}")
    create_campaign(db, "Home", "home", offer_url="https://o.example/?s={subid}")
    update_campaign(db, "swiss", cost_model="cpc", cost_value=0.5, cost_currency="CHF")
    update_campaign(db, "home", cost_model="cpc", cost_value=0.25)  # USD, the report currency.
    tracker = make_tracker()
    tracker.refresh()
    day_1 = day_of(int(clock() * 1000))
    # Day 1: two CHF clicks at the model's 0.5, one whose URL said cost=2 (CHF), one USD click.
    for n, cost in ((1, 0.0), (2, 0.0), (3, 2.0)):
        tracker.track(tracker.campaign("swiss"), Visit(ip=f"198.51.100.{n}", user_agent="UA", cost=cost))
    tracker.track(tracker.campaign("home"), Visit(ip="198.51.100.9", user_agent="UA"))
    clock.advance(DAY_S)
    day_2 = day_of(int(clock() * 1000))
    tracker.track(tracker.campaign("swiss"), Visit(ip="198.51.100.4", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert waiting(db) == [("CHF", 0.5), ("CHF", 0.5), ("CHF", 0.5), ("CHF", 2.0)]

    before = reports(db, settings, group_by=("day", "campaign"))
    by_row = {
        (r["day"], r["campaign_name"]): (r["cost"], r["uncosted"], r["uncosted_note"]) for r in before["rows"]
    }
    d1, d2 = day_1.isoformat(), day_2.isoformat()
    assert by_row == {
        (d1, "swiss"): (0, 3, note(3, "CHF", 3.0, [d1])),
        (d1, "home"): (pytest.approx(0.25), 0, ""),
        (d2, "swiss"): (0, 1, note(1, "CHF", 0.5, [d2])),
    }
    assert (before["total"]["cost"], before["total"]["uncosted"]) == (pytest.approx(0.25), 4)
    assert before["total"]["uncosted_note"] == (
        "4 clicks with a cost without an exchange rate into USD, not in cost, profit or ROI until one is "
        f"set: 4 in CHF (cost 3.5 CHF) on {d1}, {d2} (UTC days)."
    )

    # The feed brings both days' rates: each click's cost at its own day's rate.
    rates = {day_1: {"CHF": 1.1}, day_2: {"CHF": 1.2}}
    fetched = store_fetched(db, rates, "feed.example")
    assert fetched.costs == 4 and waiting(db) == []
    expected = {d1: 3.0 * 1.1, d2: 0.5 * 1.2}  # The independent calculation, per day.
    after = reports(db, settings, group_by=("day", "campaign"))
    assert {(r["day"], r["campaign_name"]): (r["cost"], r["uncosted"]) for r in after["rows"]} == {
        (d1, "swiss"): (pytest.approx(expected[d1]), 0),
        (d1, "home"): (pytest.approx(0.25), 0),
        (d2, "swiss"): (pytest.approx(expected[d2]), 0),
    }
    assert after["total"]["cost"] == pytest.approx(expected[d1] + expected[d2] + 0.25)
    assert (after["total"]["uncosted"], after["total"]["uncosted_note"]) == (0, "")
    # A click landing now is converted as it lands, at the rate in force then (the flusher's clock is the
    # real one, before both of the fake days: the first rate stored), as any click is.
    tracker.track(tracker.campaign("swiss"), Visit(ip="198.51.100.5", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert waiting(db) == []
    total = reports(db, settings)["total"]["cost"]
    assert total == pytest.approx(expected[d1] + expected[d2] + 0.25 + 0.5 * 1.1)


def test_a_spend_in_a_currency_without_a_rate_waits_is_replaced_by_a_later_set_and_converts(
    db, settings, make_tracker, clock
):
    run_deferred(db)
    campaign = create_campaign(db, "Paid", "paid", offer_url="https://o.example/?s={subid}")
    tracker = make_tracker()
    tracker.refresh()
    for n in range(4):
        tracker.track(tracker.campaign("paid"), Visit(ip=f"198.51.100.{n}", user_agent="UA"))
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    start = int(clock() * 1000) // DAY_MS * DAY_MS
    store = CostStore(db.connection())
    rows = store.scope_clicks(campaign.id, start, start + DAY_MS)
    scope = CostScope((campaign.id,), campaign.id)
    day = day_of(start).isoformat()

    def spend(amount: float, currency: str) -> None:
        request = CostRequest(scope, day, day, "UTC", start, start + DAY_MS, amount, currency)
        set_costs_together(db, [(request, rows, [])], actor=tracker_actor())

    # 10 GBP over 4 clicks, as a spend sync writes it: no rate yet, so each click's 2.5 GBP waits.
    spend(10.0, "GBP")
    assert waiting(db) == [("GBP", 2.5)] * 4
    before = reports(db, settings)["total"]
    assert (before["cost"], before["uncosted"]) == (0, 4)
    # A later set in USD replaces it click by click: nothing waits any more.
    spend(8.0, "USD")
    assert waiting(db) == [] and reports(db, settings)["total"]["cost"] == pytest.approx(8.0)
    # GBP again, then its rate: 10 GBP at 1.3.
    spend(10.0, "GBP")
    assert reports(db, settings)["total"]["uncosted"] == 4
    logged = [(e["amount"], e["currency"], e["report_amount"]) for e in store.entries()]
    # The cost sets' log (the test passes no earlier sets to replace, so all three stay): no rate, no
    # report amount yet.
    assert logged == [(10.0, "GBP", 0.0), (8.0, "USD", 8.0), (10.0, "GBP", 0.0)]
    changes = set_rates(db, {"GBP": 1.3}, day=day_of(start))
    assert changes[0].costs == 4 and "4 click cost(s) in GBP that waited for a rate have one" in (
        changes[0].summary("USD")
    )
    after = reports(db, settings)["total"]
    assert (after["cost"], after["uncosted"], waiting(db)) == (pytest.approx(13.0), 0, [])
    logged = [(e["amount"], e["currency"], e["report_amount"]) for e in store.entries()]
    assert logged == [(10.0, "GBP", 13.0), (8.0, "USD", 8.0), (10.0, "GBP", 13.0)]  # ... and now one.
    # A click whose cost was stored waiting by a flusher that read the rates before GBP had one (its
    # click 0, its 2 GBP waiting): the flusher's next round converts it at its day's rate.
    click_id = rows[0][0]
    with write_tx(db):
        set_click_cost(db, click_id, 0.0)
        store.add_unrated([(click_id, rows[0][1], "GBP", 2.0)])
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert waiting(db) == [] and reports(db, settings)["total"]["cost"] == pytest.approx(13.0 - 3.25 + 2.6)


def set_click_cost(db, click_id: int, cost: float) -> None:
    """The click's cost, the rollups moved with it (as a flusher that landed it at that cost left them)."""
    from models.reporting.clickcosts import write_click_costs

    write_click_costs(db, CostStore(db.connection()), {click_id: cost}, {})


def tracker_actor():
    from models.accounts.principal import Principal

    return Principal(None, "spend:test", "admin", True, False)
