"""Writing click costs: new costs for given clicks with the rollups moved by the differences, and the
costs that wait for an exchange rate (migration 0034's `unrated_cost`) kept beside them.

A click's cost is stored in the report currency (models/reporting/currency.py). One whose currency has
no rate into it yet (a campaign's cost currency, a spend synced in a platform's currency) is stored as
0 on the click, so the rollups stay additive and a report never adds two currencies, and as received
(amount and currency) in `unrated_cost`, so a report names the rows whose cost waits and the cost is
not lost: when a rate for its currency is stored, convert_unrated_costs writes it to the click at the
rate in force on the click's day (the rule revenue follows), moving the rollups, and the columnar
history copies the click again (CostStore.set_costs). Any later write of a click's cost replaces its
waiting one. Used by models/reporting/costs.py (the flusher's models, spreads, spend syncs) and
models/reporting/currency.py (a rate stored); kept apart from both so neither imports the other.
"""

from __future__ import annotations

import math

from peewee import Database

from models.reporting.rollups import RollupDelta
from models.store.costs import CostStore
from models.store.currency import CurrencyStore
from models.store.database import write_tx
from models.tables.dimensions import DAY_MS, HOUR_MS

# No spend is this large: a cost or a rollup beyond it came from a click URL before costs were bounded
# (a float sum of such values loses every cent), and is rebuilt from raw clicks, not moved by a difference.
EXACT_LIMIT = 1e12

# A click's cost waiting for a rate: click id -> (currency, amount in it).
Unrated = dict[int, tuple[str, float]]


def write_click_costs(
    db: Database,
    store: CostStore,
    costs: dict[int, float],
    poisoned: dict,
    unrated: Unrated | None = None,
) -> None:
    """Set these clicks' costs (report currency) in one transaction, moving the rollups by the
    differences; a click whose old cost cannot be moved by a difference goes into `poisoned` (campaign
    -> hours) for a rebuild. Any cost of theirs waiting for a rate is replaced: by `unrated`'s, for the
    clicks in it (their cost in `costs` is then 0), else by none."""
    conn = db.connection()
    with write_tx(db):
        delta = RollupDelta()
        position, target = backfilled(store)
        updates = []
        waiting = []
        for click_id, old_cost, *key in store.chunk(list(costs)):
            if unrated and click_id in unrated:
                waiting.append((click_id, key[0], *unrated[click_id]))
            new_cost = costs[click_id]
            if new_cost == old_cost:
                continue  # The same set again: nothing to write.
            updates.append((new_cost, click_id))
            if position < click_id <= target:
                continue  # Not in the rollups yet: the backfill adds it at its new cost.
            if is_exact(old_cost):
                delta.add_click_cost(tuple(key), new_cost - old_cost)
            else:
                poisoned.setdefault(key[1], set()).add(key[0] - key[0] % HOUR_MS)
        store.drop_unrated(list(costs))
        store.add_unrated(waiting)
        if updates:
            store.set_costs(updates)
            delta.apply(conn)


def convert_unrated_costs(
    db: Database, report: str, *, currency: str | None = None, chunk_size: int = 5000
) -> int:
    """Write every waiting cost whose currency has a rate now to its click, at the rate in force on the
    click's day, in the caller's transaction or one of its own; how many. `currency`: only its.

    Called where a rate is stored, and by the flusher at each start: a click that landed with its
    cost waiting while a rate was being stored (the flusher read the rates before it) is converted at
    the next flush, not left waiting for another rate."""
    conn = db.connection()
    store = CostStore(conn)
    if not store.has_unrated():
        return 0
    rates = CurrencyStore(conn)
    # PERF: the flusher asks at each round; while costs wait for a currency with no rate at all, a few
    # small reads answer it, with no write transaction and no read of the waiting rows.
    codes = [currency] if currency else store.unrated_currencies()
    due = [code for code in codes if code == report or rates.rate_at(code, 0) is not None]
    if not due:
        return 0
    costs: dict[int, float] = {}
    with write_tx(db):
        for code in due:
            by_day: dict[int, float | None] = {}
            for click_id, created_at, amount in store.unrated_between(code, None, None):
                day = created_at - created_at % DAY_MS  # A rate applies from a day's start (UTC).
                if day not in by_day:
                    by_day[day] = 1.0 if code == report else rates.rate_at(code, day)
                rate = by_day[day]
                if rate is None:
                    break  # None for one day is none for all: the currency has no rate at all.
                costs[click_id] = round(amount * rate, 6)
            if by_day and None not in by_day.values():
                _rate_entries(store, rates, code, report)
        ids = list(costs)
        for offset in range(0, len(ids), chunk_size):
            chunk = ids[offset : offset + chunk_size]
            write_click_costs(db, store, {click_id: costs[click_id] for click_id in chunk}, {})
    return len(costs)


def _rate_entries(store: CostStore, rates: CurrencyStore, code: str, report: str) -> None:
    """The cost sets in `code` recorded while it had no rate get their report amount, at the rate in
    force on their first day (a set over days whose rates differ: its clicks' costs, each at its own
    day's rate, are what reports sum; the set's log shows the first day's)."""
    amounts = []
    for entry_id, start_at, amount in store.unrated_entries(code, report):
        rate = rates.rate_at(code, start_at - start_at % DAY_MS)
        if rate is not None:
            amounts.append((round(amount * rate, 6), entry_id))
    store.set_report_amounts(amounts)


def backfilled(store: CostStore) -> tuple[int, int]:
    """(position, target) of the rollup backfill: while it runs, the rollups hold the clicks up to
    its position and those landed after it started (above its target); it adds the rest later."""
    state = store.backfill_state()
    return (state[1], state[2]) if state and state[0] != "done" else (2**62, 2**62)


def is_exact(cost: float) -> bool:
    """Whether a stored cost can be moved by a difference (not Infinity, NaN or absurdly large)."""
    return math.isfinite(cost) and abs(cost) <= EXACT_LIMIT


def rebuild_click_costs(conn, campaign_id: int, hours: set[int]) -> None:
    """Set the click costs of the campaign's rollup rows for these UTC hours (and their days) to the
    sums of their raw clicks' costs. A row's clicks pruned since lose their cost: it held no number
    a report could show anyway."""
    store = CostStore(conn)
    position, target = backfilled(store)
    days = {hour - hour % DAY_MS for hour in hours}
    store.rebuild_click_costs(campaign_id, sorted(hours), sorted(days), position, target)
