"""Costs: each click's cost from its campaign's cost model, and a spend spread over a period's clicks.

A click's cost is set by the spool flusher as it lands (never on the click path): the click URL's
`cost=` if it had one ("auto"), else the campaign's per-click model (cpc: the value; cpuc: the
value for a click unique in the campaign; cpm: a thousandth of it). Per-conversion models (cpa,
cps, revshare) are costed on the conversion (models/conversions/postbacks.py).

`lanner cost set` (and /api/v1/costs, the panel's cost form) replaces the costs of a scope's clicks in a
period with an amount spread evenly over them (Keitaro's "update costs"): a campaign's clicks, or all
the clicks of a traffic source's campaigns pooled, narrowed to those with given sub id values (a zone,
named as the source names it). Bots in the scope (and repeats, when only unique clicks pay) get 0, so
the real clicks carry the whole amount. Each click holds one cost, so the latest set wins click by
click: a set over a range overlapping an earlier one replaces it where they overlap, and a zone's set
after the campaign's replaces the zone's share of it (the campaign's total moves by the difference).
The spread is in micro-units, so the clicks' costs add up to the amount exactly, and is written in
short chunks, moving the rollups by the difference in the same transactions. Each set is recorded
(cost_entry), and a later set covering an earlier one's range and scope drops it from that list.

A campaign's costs are in its cost currency; clicks store them converted into the report currency
at the rate of the moment they land (models/reporting/currency.py). A cost in a currency with no rate
yet (a campaign's, a synced spend's) waits in it until one comes (models/reporting/clickcosts.py); a
cost typed with `lanner cost set` in one is refused instead.

It is also the repair for costs poisoned before click URL costs were bounded (a visitor's
`cost=1e308`): a difference cannot move a rollup holding Infinity (Infinity - Infinity is NaN), so
the rollup rows of the hours (and days) holding such a cost are rebuilt from the raw clicks instead.
The statements are models/store/costs.py's.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.choices import SUB_ID_SLOTS
from models.clicks.record import CAMPAIGN_ID, CLICK_COLUMNS
from models.errors import LannerError
from models.reporting.clickcosts import EXACT_LIMIT, rebuild_click_costs, write_click_costs
from models.reporting.currency import check_code, rate_of, report_currency
from models.reporting.timerange import local_instant, zone
from models.store.costs import COST_COLUMNS, CostStore
from models.store.database import write_tx
from models.tables.dimensions import HOUR_MS

COST_DIMENSIONS = COST_COLUMNS  # What a cost may be set per, besides the whole campaign.

SPREAD_CHUNK = 5000
MAX_AMOUNT = 1e12

_COST = CLICK_COLUMNS.index("cost")
_SUBID = CLICK_COLUMNS.index("subid")
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
        # campaign -> (model, value, rate or None for none, cost currency)
        self.models: dict[int, tuple[str, float, float | None, str]] = {}

    def load(self, conn) -> None:
        report = report_currency(conn)
        rates: dict[str, float | None] = {}
        self.models = {}
        for campaign_id, model, value, currency in CostStore(conn).campaign_costs():
            if currency not in rates:
                rates[currency] = rate_of(conn, currency, report)
            self.models[campaign_id] = (model, value, rates[currency], currency)

    def fill(self, rows: list[list]) -> list[tuple[str, float, str]]:
        """Set each record's cost in the report currency: the click URL's `cost=` (in the campaign's
        cost currency) converted, or the campaign's per-click model. A non-finite cost, which only a
        corrupt journal line could hold (it would sum into Infinity), counts as none.

        A cost in a currency with no rate yet is set to 0 and returned, (currency, amount, subid), to
        wait for one in `unrated_cost` (models/reporting/clickcosts.py) rather than be lost."""
        unrated = []
        for row in rows:
            if row[_COST] and not math.isfinite(row[_COST]):
                row[_COST] = 0.0
            model = self.models.get(row[CAMPAIGN_ID])
            if model is None:
                continue
            kind, value, rate, currency = model
            if row[_COST]:
                amount = row[_COST]
            elif value:
                amount = click_cost(kind, value, row[_UNIQUE_CAMPAIGN])
            else:
                continue
            if rate is None:
                row[_COST] = 0.0
                if amount:
                    unrated.append((currency, round(amount, 6), row[_SUBID]))
            elif rate != 1.0 or not row[_COST]:
                row[_COST] = round(amount * rate, 6)
        return unrated


MAX_FILTER_VALUE = 500  # A sub id value is at most this long on a click (models/clicks/visit.py bounds them).


@dataclass(frozen=True)
class CostScope:
    """The clicks a cost is spread over: a campaign's, or every campaign's of a traffic source, narrowed
    to those with one value in each of `filters` ((click column, value), sorted; sub id slots, or the
    click's source); `label` says them as they were given (`zoneid=123`)."""

    campaign_ids: tuple[int, ...]
    campaign_id: int | None = None
    source_id: int | None = None
    source_name: str = ""
    filters: tuple[tuple[str, str], ...] = ()
    label: str = ""

    @property
    def what(self) -> str:
        of = f" with {self.label}" if self.label else ""
        if self.source_id is not None:
            return f"The campaigns of traffic source {self.source_name!r} have no clicks{of}"
        return f"The campaign has no clicks{of}"


def parse_sub_ids(expressions: Iterable[str]) -> list[tuple[str, str]]:
    """`zoneid=123` expressions (`--sub-id`, the panel's field) as (name, value) pairs."""
    pairs = []
    for expression in expressions:
        name, separator, value = expression.partition("=")
        if not separator or not name.strip():
            raise CostError(f"{expression[:60]!r} is not a sub id value such as zoneid=123 or sub_id_3=abc.")
        pairs.append((name.strip(), value.strip()))
    return pairs


def cost_scope(
    db: Database,
    *,
    campaign=None,
    source=None,
    sub_ids: Iterable[tuple[str, str]] | Mapping[str, str] = (),
) -> CostScope:
    """The scope of a cost for a campaign or a traffic source (Peewee rows), narrowed by sub id values
    named as the source names them (`zoneid`, for the campaign's source or this source) or by their
    columns (`sub_id_3`, `source`); CostError for a name neither knows or a value missing."""
    from models.routing.sources import loads, slot_of
    from models.tables.campaign import Campaign
    from models.tables.source import TrafficSource

    if (campaign is None) == (source is None):
        raise CostError("A cost is for one campaign or for one traffic source.")
    source_row = source
    if campaign is not None and campaign.source_id:
        source_row = TrafficSource.get_or_none(TrafficSource.id == campaign.source_id)
    slots = slot_of(loads(source_row.parameters)) if source_row else {}
    pairs = list(sub_ids.items()) if isinstance(sub_ids, Mapping) else list(sub_ids)
    filters: dict[str, str] = {}
    for name, value in pairs:
        if not isinstance(value, str) or not value or len(value) > MAX_FILTER_VALUE:
            raise CostError(f"Give {name!r} a value of 1 to {MAX_FILTER_VALUE} characters.")
        if name in COST_COLUMNS:
            column = name
        elif name in slots:
            column = f"sub_id_{slots[name]}"
        else:
            known = f"; traffic source {source_row.name!r} names {', '.join(slots)}" if slots else ""
            if source_row is None:
                known = "; the campaign has no traffic source"
            raise CostError(
                f"{name[:40]!r} is neither sub_id_1 … sub_id_{SUB_ID_SLOTS}, source, nor a parameter "
                f"of the {'campaign' if campaign is not None else 'traffic source'}'s traffic source{known}."
            )
        if column in filters:
            raise CostError(f"The cost names {column} twice.")
        filters[column] = value
    label = ", ".join(f"{name}={value}" for name, value in pairs)
    if campaign is not None:
        return CostScope((campaign.id,), campaign.id, None, "", tuple(sorted(filters.items())), label)
    of_source = Campaign.select(Campaign.id).where(Campaign.source_id == source.id).order_by(Campaign.id)
    ids = tuple(c.id for c in of_source)
    if not ids:
        raise CostError(f"Traffic source {source.name!r} has no campaigns to spread a cost over.")
    return CostScope(ids, None, source.id, source.name, tuple(sorted(filters.items())), label)


@dataclass(frozen=True)
class SpreadCost:
    """What `set_cost` did: `amount` in `currency` (`report_amount` of it in the report currency) over
    `clicks` clicks, `unpaid_clicks` more in the scope (bots, or repeats with unique_only) set to 0;
    `replaced`: the earlier cost sets it covered, dropped from the list."""

    campaign_id: int | None
    source_id: int | None
    filters: dict[str, str]
    label: str
    clicks: int
    unpaid_clicks: int
    per_click: float
    amount: float
    currency: str
    report_amount: float
    report_currency: str
    replaced: int = 0


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
    """set_cost for one campaign, narrowed to one source or sub id value (`where`); what the scripts
    written before scopes call."""
    from models.tables.campaign import Campaign

    campaign = Campaign.get_by_id(campaign_id)
    scope = cost_scope(db, campaign=campaign, sub_ids=[where] if where else ())
    request = cost_request(
        db, scope, since, until, amount, currency=currency or cost_currency, timezone=timezone
    )
    return set_cost(db, request, on_progress=on_progress, actor=actor)


@dataclass(frozen=True)
class CostRequest:
    """One cost to set, checked but for its clicks (cost_request): the scope, the period as given and
    as UTC bounds, the amount in its currency, and whom it charges."""

    scope: CostScope
    since: str
    until: str
    timezone: str
    start_ms: int
    end_ms: int
    amount: float
    currency: str
    include_bots: bool = False
    unique_only: bool = False


def check_amount(amount: float) -> None:
    """CostError for an amount a cost cannot have."""
    if not 0 <= amount <= MAX_AMOUNT:  # NaN too
        raise CostError(f"The amount must be a number from 0 to {MAX_AMOUNT:,.0f}.")


def cost_request(
    db: Database,
    scope: CostScope,
    since: str,
    until: str,
    amount: float,
    *,
    currency: str | None = None,
    timezone: str = "UTC",
    include_bots: bool = False,
    unique_only: bool = False,
) -> CostRequest:
    """A cost for `scope` from `since` to `until` (local dates in `timezone`) of `amount` in `currency`
    (default the campaign's cost currency, or the report currency for a source); CostError for an amount,
    currency or period that cannot be set."""
    check_amount(amount)
    conn = db.connection()
    report = report_currency(conn)
    if currency:
        currency = check_code(currency)
    elif scope.campaign_id is not None:
        from models.tables.campaign import Campaign

        currency = Campaign.get_by_id(scope.campaign_id).cost_currency
    else:
        currency = report
    if currency != report and rate_of(conn, currency, report) is None:
        raise CostError(
            f"There is no exchange rate for {currency} into the report currency {report}; "
            f"set one first with `lanner currency rate set {currency} RATE`."
        )
    tz = zone(timezone)
    start, end = local_instant(since, tz, is_end=False), local_instant(until, tz, is_end=True)
    if end <= start:
        raise CostError("The period ends before it starts.")
    return CostRequest(scope, since, until, timezone, start, end, amount, currency, include_bots, unique_only)


def check_clicks(db: Database, request: CostRequest, rows: list[tuple] | None = None) -> int:
    """The clicks the cost would be spread over; CostError if there are none (a batch checks every item
    before it sets any). `rows`: the scope's clicks as CostStore.scope_clicks gives them, read already
    (a paste reads many zones' in one scan)."""
    if rows is None:
        rows = _scope_rows(CostStore(db.connection()), request.scope, request.start_ms, request.end_ms)
    return _paid_count(rows, request.scope, request.include_bots, request.unique_only)


def set_cost(
    db: Database,
    request: CostRequest,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    actor: Principal = CLI,
    chunk_size: int = SPREAD_CHUNK,
    rows: list[tuple] | None = None,
    earlier: list[dict] | None = None,
) -> SpreadCost:
    """`lanner cost set`, `/api/v1/costs` and the panel's cost form: replace the costs of the request's
    clicks with its amount spread evenly over them; bots (and, with `unique_only`, repeat clicks) in the
    scope get cost 0 unless `include_bots`.

    Recorded (cost_entry) and audited once, after the spread: a long one writes in many transactions,
    so its entry says what was set when it is all set. The entries of earlier sets whose range and
    scope this one covers are dropped: their clicks' costs are this one's now.

    `rows` and `earlier`, for a caller setting many in one transaction (a paste of zone costs): the
    scope's clicks (as CostStore.scope_clicks gives them) and the recorded entries within the range
    that it may cover, read already, so that each set does not read them again."""
    scope, start, end, amount, currency = (
        request.scope,
        request.start_ms,
        request.end_ms,
        request.amount,
        request.currency,
    )
    clicks, per_click, unpaid = _spread(
        db,
        scope,
        start,
        end,
        amount,
        currency=currency,
        include_bots=request.include_bots,
        unique_only=request.unique_only,
        on_progress=on_progress,
        chunk_size=chunk_size,
        rows=rows,
    )
    conn = db.connection()
    report = report_currency(conn)
    rate = 1.0 if currency == report else rate_of(conn, currency, report) or 0.0
    store = CostStore(conn)
    with write_tx(db):
        candidates = store.entries(start, end) if earlier is None else earlier
        covered = [e["id"] for e in candidates if _covers(scope, e)]
        store.drop_entries(covered)
        store.add_entry(
            {
                "campaign_id": scope.campaign_id,
                "source_id": scope.source_id,
                "filters": json.dumps(dict(scope.filters), sort_keys=True),
                "label": scope.label,
                "start_at": start,
                "end_at": end,
                "since": request.since,
                "until": request.until,
                "timezone": request.timezone,
                "amount": amount,
                "currency": currency,
                "report_amount": round(amount * rate, 6),
                "report_currency": report,
                "clicks": clicks,
                "unpaid_clicks": unpaid,
                "is_bots_included": int(request.include_bots),
                "is_unique_only": int(request.unique_only),
                "actor": actor.name,
                "created_at": int(time.time() * 1000),
            }
        )
        entity: tuple[str, int | None]
        if scope.campaign_id is not None:
            entity = ("campaign", scope.campaign_id)
        else:
            entity = ("source", scope.source_id)
        record_change(
            db,
            actor,
            *entity,
            "cost",
            None,
            {
                "from": request.since,
                "to": request.until,
                "timezone": request.timezone,
                "amount": amount,
                "currency": currency,
                "clicks": clicks,
                "unpaid_clicks": unpaid,
                **dict(scope.filters),
                **({"include_bots": True} if request.include_bots else {}),
                **({"unique_only": True} if request.unique_only else {}),
            },
        )
    return SpreadCost(
        scope.campaign_id,
        scope.source_id,
        dict(scope.filters),
        scope.label,
        clicks,
        unpaid,
        per_click,
        amount,
        currency,
        round(amount * rate, 6),
        report,
        len(covered),
    )


def _covers(scope: CostScope, entry: dict) -> bool:
    """Whether a set over `scope` rewrote every click of an earlier `entry` lying within its range: the
    entry is of a campaign in the scope (or of the same source), narrowed at least as far."""
    filters = json.loads(entry["filters"] or "{}")
    if not set(scope.filters) <= set(filters.items()):
        return False
    if entry["campaign_id"] is not None:
        return entry["campaign_id"] in scope.campaign_ids
    return scope.source_id is not None and entry["source_id"] == scope.source_id


def cost_entries(db: Database, *, campaign_ids=None, source_id: int | None = None) -> list[dict]:
    """The cost sets recorded, newest first; with `campaign_ids`, those of these campaigns and of their
    traffic sources (a source's set covers them too); with `source_id`, that source's and its campaigns'."""
    from models.tables.campaign import Campaign

    entries = CostStore(db.connection()).entries()
    if campaign_ids is not None or source_id is not None:
        ids = set(campaign_ids or ())
        if source_id is not None:
            ids |= {c.id for c in Campaign.select(Campaign.id).where(Campaign.source_id == source_id)}
        sources: set[int | None] = {source_id} if source_id is not None else set()
        sources |= (
            {c.source_id for c in Campaign.select(Campaign.source_id).where(Campaign.id.in_(list(ids)))}
            if ids
            else set()
        )
        entries = [
            e
            for e in entries
            if e["campaign_id"] in ids or (e["campaign_id"] is None and e["source_id"] in sources)
        ]
    for entry in entries:
        entry["filters"] = json.loads(entry["filters"] or "{}")
        entry["is_bots_included"] = bool(entry["is_bots_included"])
        entry["is_unique_only"] = bool(entry["is_unique_only"])
        is_campaign = entry["campaign_id"] is not None
        entry["scope"] = f"campaign {entry['campaign_id']}" if is_campaign else f"source {entry['source_id']}"
    return entries[::-1]


def spread_cost(
    db: Database,
    campaign_id: int,
    start_ms: int,
    end_ms: int,
    amount: float,
    *,
    currency: str | None = None,
    where: tuple[str, str] | None = None,
    include_bots: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[int, float]:
    """Give the campaign's clicks in [start_ms, end_ms) costs summing to `amount` (in `currency`,
    converted at today's rate; None: the report currency), bots 0 unless `include_bots`; (paid clicks,
    per click in the report currency). `where` (a column of COST_COLUMNS, a value): only the clicks
    with that source or sub id value. Not recorded as a cost set (tests, data tools)."""
    if where is not None and where[0] not in COST_COLUMNS:
        raise CostError(
            f"A cost is set per campaign, or per source or sub_id_1 … sub_id_30 value, not {where[0]!r}."
        )
    filters = (where,) if where else ()
    scope = CostScope((campaign_id,), campaign_id, filters=filters, label="=".join(where or ()))
    clicks, per_click, _ = _spread(
        db,
        scope,
        start_ms,
        end_ms,
        amount,
        currency=currency,
        include_bots=include_bots,
        on_progress=on_progress,
    )
    return clicks, per_click


def _spread(
    db: Database,
    scope: CostScope,
    start_ms: int,
    end_ms: int,
    amount: float,
    *,
    currency: str | None = None,
    include_bots: bool = False,
    unique_only: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    chunk_size: int = SPREAD_CHUNK,
    rows: list[tuple] | None = None,
) -> tuple[int, float, int]:
    """Spread `amount` over the scope's clicks in [start_ms, end_ms); (paid clicks, per click in the
    report currency, unpaid clicks set to 0).

    In micro-units of the report currency, so the clicks' costs add up to the amount exactly: each paid
    click gets amount // n, and the last (amount % n) of them, by time then id, one micro-unit more.
    Written in `chunk_size`-click transactions, each moving the rollups by the differences, so the
    spool flusher's click writes wait for one chunk at most, never the whole spread."""
    check_amount(amount)
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
    if rows is None:  # Else read already, in the caller's transaction (a paste's zones, in one scan).
        rows = _scope_rows(store, scope, start_ms, end_ms)
    paid = _paid_count(rows, scope, include_bots, unique_only)
    per_click = round(amount / paid, 6)
    costs = spread_micros(rows, paid, amount, include_bots, unique_only)
    done = 0
    poisoned: dict[int, set[int]] = {}
    for offset in range(0, len(rows), chunk_size):
        chunk = rows[offset : offset + chunk_size]
        write_click_costs(db, store, {row[0]: costs[row[0]] for row in chunk}, poisoned)
        done += len(chunk)
        if on_progress:
            on_progress(done, len(rows))
    with write_tx(db):
        for campaign_id in scope.campaign_ids:
            hours = poisoned.get(campaign_id, set())
            hours.update(
                store.poisoned_hours(campaign_id, start_ms - start_ms % HOUR_MS, end_ms, EXACT_LIMIT)
            )
            if hours:
                rebuild_click_costs(conn, campaign_id, hours)
    return paid, per_click, len(rows) - paid


def spread_micros(
    rows: list[tuple], paid: int, amount: float, include_bots: bool, unique_only: bool
) -> dict[int, float]:
    """Each of `rows`' click's cost for `amount` (report currency) over its `paid` paying clicks, in
    micro-units: amount // paid each, one more for the last (amount % paid) of them, the rest 0."""
    base, extra = divmod(round(amount * 1_000_000), paid)
    costs: dict[int, float] = {}
    paying = 0
    for row in rows:
        if _pays(row, include_bots, unique_only):
            costs[row[0]] = (base + (paying >= paid - extra)) / 1_000_000
            paying += 1
        else:
            costs[row[0]] = 0.0
    return costs


def set_costs_together(
    db: Database,
    items: list[tuple[CostRequest, list[tuple], list[dict]]],
    *,
    actor: Principal,
    spend_connection_id: int | None = None,
) -> None:
    """Many cost sets of one campaign in one transaction, each as set_cost would (not audited: the caller
    audits the whole): `items` are (request, its scope's clicks as CostStore.scope_clicks gives them,
    the recorded entries it may cover). Every request's clicks must have been checked (check_clicks).

    PERF: one read of the clicks' old costs, one rollup delta and one poisoned-hours look for all of them:
    a spend sync's day of a campaign is thousands of zones (docs/platforms.md has the figures)."""
    conn = db.connection()
    store = CostStore(conn)
    report = report_currency(conn)
    rates: dict[str, float | None] = {report: 1.0}
    costs: dict[int, float] = {}
    unrated: dict[int, tuple[str, float]] = {}
    spread: list[tuple[CostRequest, int, int, float]] = []
    for request, rows, _ in items:
        if request.currency not in rates:
            rates[request.currency] = rate_of(conn, request.currency, report)
        rate = rates[request.currency]
        paid = _paid_count(rows, request.scope, request.include_bots, request.unique_only)
        if rate is None:
            # Spread in its own currency, to wait for a rate (models/reporting/clickcosts.py); 0 meanwhile.
            amounts = spread_micros(rows, paid, request.amount, request.include_bots, request.unique_only)
            unrated.update((i, (request.currency, amount)) for i, amount in amounts.items() if amount)
            costs.update(dict.fromkeys(amounts, 0.0))
        else:
            amount = round(request.amount * rate, 6)
            costs.update(spread_micros(rows, paid, amount, request.include_bots, request.unique_only))
        spread.append((request, paid, len(rows) - paid, rate or 0.0))
    if not items:
        return
    poisoned: dict[int, set[int]] = {}
    now = int(time.time() * 1000)
    with write_tx(db):
        write_click_costs(db, store, costs, poisoned, unrated)
        start = min(request.start_ms for request, *_ in items)
        end = max(request.end_ms for request, *_ in items)
        for campaign_id in {c for request, *_ in items for c in request.scope.campaign_ids}:
            hours = poisoned.get(campaign_id, set())
            hours.update(store.poisoned_hours(campaign_id, start - start % HOUR_MS, end, EXACT_LIMIT))
            if hours:
                rebuild_click_costs(conn, campaign_id, hours)
        covered: list[int] = []
        entries: list[dict] = []
        for (request, paid, unpaid, rate), (_, _, earlier) in zip(spread, items, strict=True):
            scope = request.scope
            covered.extend(e["id"] for e in earlier if _covers(scope, e))
            entries.append(
                {
                    "campaign_id": scope.campaign_id,
                    "source_id": scope.source_id,
                    "filters": json.dumps(dict(scope.filters), sort_keys=True),
                    "label": scope.label,
                    "start_at": request.start_ms,
                    "end_at": request.end_ms,
                    "since": request.since,
                    "until": request.until,
                    "timezone": request.timezone,
                    "amount": request.amount,
                    "currency": request.currency,
                    "report_amount": round(request.amount * rate, 6),
                    "report_currency": report,
                    "clicks": paid,
                    "unpaid_clicks": unpaid,
                    "is_bots_included": int(request.include_bots),
                    "is_unique_only": int(request.unique_only),
                    "actor": actor.name,
                    "created_at": now,
                    "spend_connection_id": spend_connection_id,
                }
            )
        store.drop_entries(covered)
        store.add_entries(entries)


def _scope_rows(store: CostStore, scope: CostScope, start_ms: int, end_ms: int) -> list[tuple]:
    """(id, created_at, is_bot, is_unique_campaign) of the scope's clicks, by time then id."""
    rows = [
        row
        for campaign_id in scope.campaign_ids
        for row in store.scope_clicks(campaign_id, start_ms, end_ms, scope.filters)
    ]
    if len(scope.campaign_ids) > 1:
        rows.sort(key=lambda row: (row[1], row[0]))
    return rows


def _pays(row: tuple, include_bots: bool, unique_only: bool) -> bool:
    return (include_bots or not row[2]) and (row[3] or not unique_only)


def _paid_count(rows: list[tuple], scope: CostScope, include_bots: bool, unique_only: bool) -> int:
    """How many of `rows` the cost is spread over; CostError if none."""
    if not rows:
        raise CostError(f"{scope.what} in that period; nothing to spread the cost over.")
    paid = sum(1 for row in rows if _pays(row, include_bots, unique_only))
    if not paid:
        of = f" with {scope.label}" if scope.label else ""
        which = "bots or repeat clicks" if unique_only else "bots"
        raise CostError(
            f"All {len(rows):,} clicks{of} in that period are {which}; nothing to spread the cost over"
            + ("." if unique_only else " unless bots are included.")
        )
    return paid
