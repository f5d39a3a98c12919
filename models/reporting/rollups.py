"""Hourly and daily aggregates of clicks and conversions, kept exact as they land: reports read these.

Three cubes, each an hourly and a daily table (period = the UTC hour or day it starts):
- `detail` (`rollup_hour`, `rollup_day`): campaign, stream, offer, source, country, device type,
  os, browser, language;
- `campaign` (`rollup_campaign_hour`, `rollup_campaign_day`): campaign, stream, offer only, a few
  rows per hour, for the campaign list and its breakdowns by day, stream and offer;
- `country` (`rollup_campaign_country_hour`, `rollup_campaign_country_day`, migration 0011): those
  and country, for the dashboard's top countries and country reports (by offer, stream ... too).
A report reads the smallest cube that has its dimensions: whole days from the daily table, its edge
hours from the hourly one; only a range cut inside an hour reads raw rows (models/reporting/reports.py).

Writers, each in the same transaction as the rows it aggregates, each onto its partial of a key
(migration 0036's `node`: readers sum the partials):
- the spool flusher adds every landed click (models/clicks/spool.py), onto its node's own partial,
  so the flushers of several nodes never add onto one row;
- the postback path adds a new conversion and moves a changed one from its old status to its new
  one (models/conversions/postbacks.py), on the keys of its click (conversions count at their click's time);
- `lanner cost set`, `lanner postback status map` and a new exchange rate (the conversions that
  waited for it, models/reporting/currency.py) apply their changes as deltas.
Money is summed in the report currency only: a click's cost and a conversion's `report_payout`
and cost, converted when recorded; a payout with no rate yet counts as 0 until its rate is set.
Every writer but a flusher adds onto partial 0 (the single box's flusher's too).
Clicks stored before the rollups existed are added by the deferred step `rollup_backfill`
(models/migrations/deferred.py); until it is done, reports read raw rows.
The tables' layout is models/tables/dimensions.py's, the statements models/store/rollups.py's.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

from models.clicks.record import CLICK_COLUMNS, LANDER_ID
from models.store.rollups import RollupStore
from models.tables.conversion import LEAD, REBILL, REJECTED, SALE, TRASH
from models.tables.dimensions import (
    CLICK_METRICS,
    CONVERSION_METRICS,
    DIMENSIONS,
    HOUR_MS,
    METRICS,
    TABLES,
)

# Where a click record (models/clicks/record.py) keeps the dimensions and the click metrics.
_DIMENSION_POSITIONS = tuple(CLICK_COLUMNS.index(name) for name in DIMENSIONS)
_CREATED_AT = CLICK_COLUMNS.index("created_at")
_CLICK_METRIC_POSITIONS = tuple(
    CLICK_COLUMNS.index(name)
    for name in ("is_unique_global", "is_unique_campaign", "is_unique_stream", "is_bot", "cost")
)
_STREAM, _OFFER = DIMENSIONS.index("stream_id"), DIMENSIONS.index("offer_id")
_NO_CONVERSIONS = (0,) * len(CONVERSION_METRICS)
_NO_CLICKS = (0,) * len(CLICK_METRICS)
_DIMENSIONS_OF = operator.itemgetter(*_DIMENSION_POSITIONS)
_CLICK_METRICS_OF = operator.itemgetter(*_CLICK_METRIC_POSITIONS)
_ALL_DIMENSIONS = tuple(range(len(DIMENSIONS)))


def conversion_metrics(status: str, payout: float, cost: float) -> tuple:
    """A conversion's part of CONVERSION_METRICS; an unmapped status counts nowhere."""
    return (
        int(status == LEAD),
        int(status == SALE),
        int(status == REJECTED),
        int(status == TRASH),
        int(status == REBILL),
        payout if status in (SALE, REBILL) else 0.0,
        payout if status == LEAD else 0.0,
        cost,
    )


def add_metrics(sums: dict[tuple, list], key: tuple, metrics: Iterable) -> None:
    """Add `metrics` into `sums[key]` (a NULL from an aggregate over no rows counts as 0)."""
    row = sums.get(key)
    if row is None:
        sums[key] = [value or 0 for value in metrics]
    else:
        for index, value in enumerate(metrics):
            row[index] += value or 0


def _add_counted(sums: dict[tuple, list], key: tuple, metrics: Iterable) -> None:
    """add_metrics of `metrics` that hold no NULL. PERF: one map() over the row, in C, instead of a
    Python addition per metric; each value is still added onto the same sum in the same order."""
    row = sums.get(key)
    if row is None:
        sums[key] = list(metrics)
    else:
        sums[key] = list(map(operator.add, row, metrics))


def _key(dimensions: Iterable) -> tuple:
    """Rollup dimensions: NULL stream/offer ids are 0 (a primary key cannot hold NULL)."""
    key = list(dimensions)
    key[_STREAM] = key[_STREAM] or 0
    key[_OFFER] = key[_OFFER] or 0
    return tuple(key)


class RollupDelta:
    """Changes to every rollup table, summed per key in memory and written with one upsert per key.

    PERF: a click is added once, per (hour, detail key); `apply` folds those into each table's
    period and dimensions, so six tables cost little more than one.
    """

    def __init__(self, tables: tuple = TABLES, node: int = 0) -> None:
        """`tables`: a part of TABLES, for a database not migrated to the end yet (present_tables);
        its rollup tables may then lack the later metrics too (migration 0016's) and the partials
        (0036's), asked at `apply`. `node`: the partial added onto (models/clicks/node.py
        partial_number: a flusher's own; 0 for every other writer)."""
        self.tables = tables
        self.node = node
        self.changes: dict[tuple, list] = {}
        self.metrics: tuple[str, ...] | None = None if tables is not TABLES else METRICS
        self.is_partial: bool | None = None if tables is not TABLES else True

    def _add(self, created_at: int, key: tuple, metrics: tuple) -> None:
        add_metrics(self.changes, (created_at - created_at % HOUR_MS, key), metrics)

    def add_clicks(self, records: Iterable[list]) -> None:
        """Clicks as records in CLICK_COLUMNS order (generated clicks), or JOURNAL_COLUMNS order (the
        spool flusher's rows: a click sent to a lander is an LP view)."""
        changes = self.changes
        for record in records:
            clicked = _CLICK_METRICS_OF(record)  # Unique flags, bot flag, cost.
            if None in clicked:
                clicked = tuple(value or 0 for value in clicked)
            key = _DIMENSIONS_OF(record)
            if key[_STREAM] is None or key[_OFFER] is None:
                key = _key(key)
            lp_view = 1 if len(record) > LANDER_ID and record[LANDER_ID] is not None else 0
            created_at = record[_CREATED_AT]
            _add_counted(
                changes,
                (created_at - created_at % HOUR_MS, key),
                (1, *clicked, lp_view, 0, *_NO_CONVERSIONS),
            )

    def add_lp_click(
        self, click_key: tuple, click_metrics: tuple, offer_id: int | None, conversions: Iterable[tuple] = ()
    ) -> None:
        """An LP click: its click (`click_key`: created_at and DIMENSIONS, no offer; `click_metrics` its
        unique flags, bot flag and cost) moves from no offer to the offer chosen at the LP click, with one
        LP click more (an LP view either way), and its `conversions` (status, report_payout, cost) with it."""
        created_at, key = click_key[0], _key(click_key[1:])
        metrics = (1, *click_metrics, 1)
        self._add(created_at, key, (*(-value for value in metrics), 0, *_NO_CONVERSIONS))
        moving = list(key)
        moving[_OFFER] = offer_id or 0
        moved = tuple(moving)
        self._add(created_at, moved, (*metrics, 1, *_NO_CONVERSIONS))
        for status, payout, cost in conversions:
            counted = conversion_metrics(status, payout or 0.0, cost or 0.0)
            self._add(created_at, key, (*_NO_CLICKS, *(-value for value in counted)))
            self._add(created_at, moved, (*_NO_CLICKS, *counted))

    def add_click_cost(self, click_key: tuple, cost_change: float) -> None:
        """`click_key` as RollupStore.click_key returns it."""
        self._add(click_key[0], _key(click_key[1:]), (0, 0, 0, 0, 0, cost_change, 0, 0, *_NO_CONVERSIONS))

    def add_conversion(self, click_key: tuple, metrics: tuple, sign: int = 1) -> None:
        """A conversion's metrics (conversion_metrics) on its click's key; sign -1 takes them away."""
        values = metrics if sign == 1 else tuple(-value for value in metrics)
        self._add(click_key[0], _key(click_key[1:]), (*_NO_CLICKS, *values))

    def apply(self, conn) -> None:
        """Add the changes onto every table, in the caller's transaction, and start over."""
        store = RollupStore(conn)
        if self.metrics is None:
            self.metrics = store.present_metrics()
        if self.is_partial is None:
            self.is_partial = store.is_partial()
        kept = None if self.metrics == METRICS else [METRICS.index(metric) for metric in self.metrics]
        changes = []
        for table, width, positions in self.tables:
            if width == HOUR_MS and positions == _ALL_DIMENSIONS:  # rollup_hour: the changes as they are.
                rows: Iterable[tuple[tuple, list]] = self.changes.items()
                if kept is not None:
                    rows = ((change, [metrics[i] for i in kept]) for change, metrics in rows)
                changes.append((table, [(hour, *key, *metrics) for (hour, key), metrics in rows]))
                continue
            folded: dict[tuple, list] = {}
            for (hour, key), metrics in self.changes.items():
                if kept is not None:
                    metrics = [metrics[i] for i in kept]
                # The changes hold no NULL (add_metrics made them 0).
                _add_counted(folded, (hour - hour % width, *[key[i] for i in positions]), metrics)
            changes.append((table, [(*key, *metrics) for key, metrics in folded.items()]))
        store.add(changes, self.metrics, self.node if self.is_partial else None)
        self.changes.clear()


def click_key(conn, click_id: int) -> tuple | None:
    """The key a change of this click's conversions moves (RollupStore.click_key)."""
    return RollupStore(conn).click_key(click_id)


def present_tables(conn) -> tuple:
    """The entries of TABLES whose table the database has: all of them once it is migrated to the
    end; fewer in a migration, or after `lanner db migrate --to` an earlier one (a rehearsal)."""
    return RollupStore(conn).present_tables()


def is_partial(conn) -> bool:
    """The rollups and cap counters have their per-node partials (migration 0036 gave both at once)."""
    return RollupStore(conn).is_partial()


def backfill_conversions(conn) -> None:
    """Add every stored conversion to every table (once, in the deferred step's first transaction)."""
    delta = RollupDelta(present_tables(conn))
    for status, payout, cost, *key in RollupStore(conn).conversions_with_keys():
        delta.add_conversion(tuple(key), conversion_metrics(status, payout, cost))
    delta.apply(conn)
