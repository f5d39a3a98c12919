"""Costs: each click's cost from its campaign's cost model, and a spend spread over a period's clicks.

A click's cost is set by the spool flusher as it lands (never on the click path): the click URL's
`cost=` if it had one ("auto"), else the campaign's per-click model (cpc: the value; cpuc: the
value for a click unique in the campaign; cpm: a thousandth of it). Per-conversion models (cpa,
cps, revshare) are costed on the conversion (models/conversions/postbacks.py). `lanner cost set` replaces the
costs of a campaign's clicks in a period with an amount spread evenly over them (Keitaro's
"update costs"), in short chunks, moving the rollups by the difference in the same transactions.

A campaign's costs are in its cost currency; clicks store them converted into the report currency
at the rate of the moment they land (models/reporting/currency.py), which is why a campaign cannot take a
cost currency that has no rate.

It is also the repair for costs poisoned before click URL costs were bounded (a visitor's
`cost=1e308`): a difference cannot move a rollup holding Infinity (Infinity - Infinity is NaN), so
the rollup rows of the hours (and days) holding such a cost are rebuilt from the raw clicks instead.
The statements are models/store/sqlite/costs.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.clicks.record import CAMPAIGN_ID, CLICK_COLUMNS
from models.errors import LannerError
from models.reporting.currency import check_code, rate_of, report_currency
from models.reporting.dimensions import DAY_MS, HOUR_MS
from models.reporting.rollups import RollupDelta
from models.reporting.timerange import local_instant, zone
from models.store.database import write_tx
from models.store.sqlite.costs import COST_COLUMNS, CostStore

COST_DIMENSIONS = COST_COLUMNS  # What a cost may be set per, besides the whole campaign.

SPREAD_CHUNK = 5000
# No spend is this large: a cost or a rollup beyond it came from a click URL before costs were bounded
# (a float sum of such values loses every cent), and is rebuilt from raw clicks, not moved by a difference.
EXACT_LIMIT = 1e12
MAX_AMOUNT = 1e12

_COST = CLICK_COLUMNS.index("cost")
_UNIQUE_CAMPAIGN = CLICK_COLUMNS.index("is_unique_campaign")


class CostError(LannerError, ValueError):
    """A cost that cannot be applied; the message is one sentence for the user."""


def click_cost(model: str, value: float, is_unique_campaign: int) -> float:
    if model == "cpc":
        return value
    if model == "cpuc":
        return value if is_unique_campaign else 0.0
    if model == "cpm":
        return value / 1000
    return 0.0


class ClickCosts:
    """The campaigns' per-click cost models and cost currencies' rates, read at each flush (a
    handful of rows)."""

    def __init__(self) -> None:
        self.models: dict[int, tuple[str, float, float]] = {}  # campaign -> (model, value, rate)

    def load(self, conn) -> None:
        report = report_currency(conn)
        rates: dict[str, float] = {}
        self.models = {}
        for campaign_id, model, value, currency in CostStore(conn).campaign_costs():
            if currency not in rates:
                # No rate (a cost currency set before currencies were converted): no cost rather
                # than a cost in another currency; reports name the campaign.
                rates[currency] = rate_of(conn, currency, report) or 0.0
            self.models[campaign_id] = (model, value, rates[currency])

    def fill(self, rows: list[list]) -> None:
        """Set each record's cost in the report currency: the click URL's `cost=` (in the campaign's
        cost currency) converted, or the campaign's per-click model. A non-finite cost, which only a
        corrupt journal line could hold (it would sum into Infinity), counts as none."""
        for row in rows:
            if row[_COST] and not math.isfinite(row[_COST]):
                row[_COST] = 0.0
            model = self.models.get(row[CAMPAIGN_ID])
            if model is None:
                continue
            if row[_COST]:
                if model[2] != 1.0:
                    row[_COST] = round(row[_COST] * model[2], 6)
            elif model[1]:
                row[_COST] = round(click_cost(model[0], model[1], row[_UNIQUE_CAMPAIGN]) * model[2], 6)


@dataclass(frozen=True)
class SpreadCost:
    """What `set_campaign_cost` did: `amount` in `currency`, `report_amount` of it in the report currency."""

    campaign_id: int
    where: tuple[str, str] | None
    clicks: int
    per_click: float
    amount: float
    currency: str
    report_amount: float
    report_currency: str


def set_campaign_cost(
    db: Database,
    campaign_id: int,
    since: str,
    until: str,
    amount: float,
    *,
    cost_currency: str,
    timezone: str = "UTC",
    currency: str | None = None,
    where: tuple[str, str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    actor: Principal = CLI,
) -> SpreadCost:
    """`lanner cost set`, `PUT /api/v1/costs` and the panel's cost form: spread `amount` (in `currency`,
    default the campaign's `cost_currency`) over the campaign's clicks from `since` to `until` (local
    dates in `timezone`); `where`: only those with this source or sub id value (see spread_cost).

    Audited once, after the spread: a long one writes in many transactions, so its entry says what
    was set when it is all set."""
    currency = check_code(currency) if currency else cost_currency
    tz = zone(timezone)
    start, end = local_instant(since, tz, is_end=False), local_instant(until, tz, is_end=True)
    clicks, per_click = spread_cost(
        db, campaign_id, start, end, amount, currency=currency, where=where, on_progress=on_progress
    )
    conn = db.connection()
    report = report_currency(conn)
    rate = 1.0 if currency == report else rate_of(conn, currency, report) or 0.0
    spread = SpreadCost(
        campaign_id, where, clicks, per_click, amount, currency, round(amount * rate, 6), report
    )
    with write_tx(db):
        record_change(db, actor, "campaign", campaign_id, "cost", None, {
            "from": since, "to": until, "timezone": timezone, "amount": amount, "currency": currency,
            "clicks": clicks, **({"dimension": where[0], "value": where[1]} if where else {}),
        })  # fmt: skip
    return spread


def spread_cost(
    db: Database,
    campaign_id: int,
    start_ms: int,
    end_ms: int,
    amount: float,
    *,
    currency: str | None = None,
    where: tuple[str, str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[int, float]:
    """Give the campaign's clicks in [start_ms, end_ms) costs summing to `amount` (in `currency`,
    converted at today's rate; None: the report currency); (clicks, per click in the report currency).

    `where` (a column of COST_COLUMNS, a value): only the clicks with that source or sub id value."""
    if not 0 <= amount <= MAX_AMOUNT:  # NaN too
        raise CostError(f"The amount must be a number from 0 to {MAX_AMOUNT:,.0f}.")
    if where is not None and where[0] not in COST_COLUMNS:
        raise CostError(
            f"A cost is set per campaign, or per source or sub_id_1 … sub_id_30 value, not {where[0]!r}."
        )
    conn = db.connection()
    if currency is not None:
        report = report_currency(conn)
        rate = rate_of(conn, currency, report)
        if rate is None:
            raise CostError(
                f"There is no exchange rate for {currency} into the report currency {report}; "
                f"set one first with `lanner currency rate set {currency} RATE`."
            )
        amount = round(amount * rate, 6)
    store = CostStore(conn)
    ids = store.period_clicks(campaign_id, start_ms, end_ms, where)
    if not ids:
        of = f" with {where[0]} {where[1]!r}" if where else ""
        raise CostError(f"The campaign has no clicks{of} in that period; nothing to spread the cost over.")
    per_click = round(amount / len(ids), 6)
    last_cost = round(amount - per_click * (len(ids) - 1), 6)
    done = 0
    poisoned_hours: set[int] = set()
    for offset in range(0, len(ids), SPREAD_CHUNK):
        chunk = ids[offset : offset + SPREAD_CHUNK]
        with write_tx(db):
            delta = RollupDelta()
            position, target = _backfilled(store)
            updates = []
            for click_id, old_cost, *key in store.chunk(chunk):
                new_cost = last_cost if click_id == ids[-1] else per_click
                updates.append((new_cost, click_id))
                if position < click_id <= target:
                    continue  # Not in the rollups yet: the backfill adds it at its new cost.
                if is_exact(old_cost):
                    delta.add_click_cost(tuple(key), new_cost - old_cost)
                else:
                    poisoned_hours.add(key[0] - key[0] % HOUR_MS)
            store.set_costs(updates)
            delta.apply(conn)
        done += len(chunk)
        if on_progress:
            on_progress(done, len(ids))
    with write_tx(db):
        poisoned_hours.update(
            store.poisoned_hours(campaign_id, start_ms - start_ms % HOUR_MS, end_ms, EXACT_LIMIT)
        )
        if poisoned_hours:
            rebuild_click_costs(conn, campaign_id, poisoned_hours)
    return len(ids), per_click


def _backfilled(store: CostStore) -> tuple[int, int]:
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
    position, target = _backfilled(store)
    days = {hour - hour % DAY_MS for hour in hours}
    store.rebuild_click_costs(campaign_id, sorted(hours), sorted(days), position, target)
