"""Click costs: the campaigns' cost models, a period's clicks and their costs, and the rebuild of the
rollups' click costs from raw clicks.

The rules (a click's cost under each model, how an amount is spread, which rollup rows are past
moving by a difference) are models/reporting/costs.py's.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection

from models.choices import SUB_ID_SLOTS
from models.store.history import HistoryStore
from models.store.rows import Store, fetch_one
from models.tables.dimensions import HOUR_MS

# The click columns a spend can be set for besides the campaign (a traffic source's placement, a sub id).
COST_COLUMNS = ("source", *(f"sub_id_{n}" for n in range(1, SUB_ID_SLOTS + 1)))


def rebuild_sql(table: str, width: int, dimensions: tuple[str, ...], money_sum) -> str:
    """`money_sum`: the dialect's sum of a money expression (its sums.py's float_sum).

    A key's partials (migration 0036's `node`) sum to its raw clicks' cost: the lowest partial of the
    key takes the whole sum, the others 0."""
    match = " AND ".join(
        f"COALESCE(c.{name}, 0) = r.{name}" if name in ("stream_id", "offer_id") else f"c.{name} = r.{name}"
        for name in dimensions
    )
    same_key = " AND ".join(f"o.{name} = r.{name}" for name in ("period", *dimensions))
    return (
        f"UPDATE {table} AS r SET click_cost = CASE WHEN EXISTS (SELECT 1 FROM {table} AS o "
        f"WHERE {same_key} AND o.node < r.node) THEN 0 "
        f"ELSE COALESCE((SELECT {money_sum('c.cost')} FROM click AS c "
        f"WHERE c.created_at >= r.period AND c.created_at < r.period + {width} AND {match} "
        f"AND (c.id <= ? OR c.id > ?)), 0) END WHERE r.campaign_id = ? AND r.period = ?"
    )


def scope_sql(head: str, columns: tuple[str, ...], order: str) -> str:
    """A campaign's clicks in a period with one value in each of `columns` (COST_COLUMNS only: never
    user text), from `head` (the SELECT up to its WHERE) and `order`."""
    if not set(columns) <= set(COST_COLUMNS):
        raise ValueError(f"not cost columns: {columns}")
    where = "".join(f" AND {column} = ?" for column in columns)
    return f"{head} WHERE campaign_id = ? AND created_at >= ? AND created_at < ?{where}{order}"


_ENTRY_COLUMNS = (
    "campaign_id",
    "source_id",
    "filters",
    "label",
    "start_at",
    "end_at",
    "since",
    "until",
    "timezone",
    "amount",
    "currency",
    "report_amount",
    "report_currency",
    "clicks",
    "unpaid_clicks",
    "is_bots_included",
    "is_unique_only",
    "actor",
    "created_at",
    "spend_connection_id",
)


class CostStore(Store):
    """The click costs of one connection; writes join the caller's transaction."""

    SQL_CAMPAIGN_COSTS = "SELECT id, cost_model, cost_value, cost_currency FROM campaign"
    SQL_ADD_ENTRY = (
        f"INSERT INTO cost_entry ({', '.join(_ENTRY_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(_ENTRY_COLUMNS))})"
    )
    SQL_ENTRIES = f"SELECT id, {', '.join(_ENTRY_COLUMNS)} FROM cost_entry"
    SQL_ENTRIES_WITHIN = SQL_ENTRIES + " WHERE start_at >= ? AND end_at <= ?"
    SQL_DROP_ENTRY = "DELETE FROM cost_entry WHERE id = ?"
    SQL_SPEND_ENTRIES = SQL_ENTRIES + " WHERE spend_connection_id = ? AND start_at >= ? AND start_at < ?"
    SQL_POISONED_HOURS = (
        "SELECT period FROM rollup_campaign_hour WHERE campaign_id = ? AND period >= ? AND period < ? "
        "AND NOT abs(click_cost) <= ?"  # Infinity too
    )
    # A cost set recorded while its currency had no rate: its report amount 0 until one is stored.
    SQL_UNRATED_ENTRIES = (
        "SELECT id, start_at, amount FROM cost_entry "
        "WHERE currency = ? AND report_currency = ? AND report_amount = 0 AND amount <> 0"
    )
    SQL_SET_REPORT_AMOUNT = "UPDATE cost_entry SET report_amount = ? WHERE id = ?"
    SQL_BACKFILL_STATE = "SELECT state, position, target FROM deferred_step WHERE name = 'rollup_backfill'"
    # Costs waiting for an exchange rate (migration 0034): the click's cost 0 meanwhile.
    _UNRATED_UPSERT = (
        " ON CONFLICT (click_id) DO UPDATE SET currency = excluded.currency, amount = excluded.amount"
    )
    SQL_ADD_UNRATED = (
        "INSERT INTO unrated_cost (click_id, created_at, currency, amount) VALUES (?, ?, ?, ?)"
        + _UNRATED_UPSERT
    )
    SQL_ADD_UNRATED_BY_SUBID = (
        "INSERT INTO unrated_cost (click_id, created_at, currency, amount) "
        "SELECT id, created_at, ?, ? FROM click WHERE subid = ?" + _UNRATED_UPSERT
    )
    SQL_ANY_UNRATED = "SELECT 1 FROM unrated_cost LIMIT 1"
    # A database migrated only up to before it (a rehearsal, an old test copy) has no unrated_cost.
    SQL_UNRATED_PRESENT = "SELECT 1 FROM migration_history WHERE name = '0034_cost_waits'"
    SQL_UNRATED_CURRENCIES = "SELECT DISTINCT currency FROM unrated_cost ORDER BY currency"
    SQL_DROP_UNRATED = "DELETE FROM unrated_cost WHERE click_id = ?"
    SQL_UNRATED_BETWEEN = (
        "SELECT click_id, created_at, amount FROM unrated_cost "
        "WHERE currency = ? AND created_at >= ? AND created_at < ? ORDER BY click_id"
    )

    __slots__ = ()

    def campaign_costs(self) -> list[tuple[int, str, float, str]]:
        """(campaign id, cost model, cost value, cost currency) of every campaign."""
        return self.conn.execute(self.SQL_CAMPAIGN_COSTS).fetchall()

    def scope_clicks(
        self, campaign_id: int, start_ms: int, end_ms: int, filters: tuple[tuple[str, str], ...] = ()
    ) -> list[tuple[int, int, int, int]]:
        """(id, created_at, is_bot, is_unique_campaign) of the campaign's clicks in [start_ms, end_ms),
        oldest first; `filters` ((column in COST_COLUMNS, value), ...): only those with these values."""
        sql = scope_sql(self.SQL_SCOPE_HEAD, tuple(c for c, _ in filters), self.SQL_SCOPE_ORDER)
        args = (campaign_id, start_ms, end_ms, *(value for _, value in filters))
        return self.conn.execute(sql, args).fetchall()

    def scope_clicks_by(
        self, campaign_id: int, start_ms: int, end_ms: int, column: str, values: Collection[str] | None = None
    ) -> dict[str, list[tuple[int, int, int, int]]]:
        """scope_clicks's rows of the campaign's clicks in [start_ms, end_ms) grouped by their value of
        `column` (in COST_COLUMNS), each group oldest first: one scan for many zones' costs. With
        `values`, only the clicks with one of them (a paste's zones: the scan still walks the period,
        the zone column has no index, but returns only their rows)."""
        if column not in COST_COLUMNS:
            raise ValueError(f"not a cost column: {column}")
        head = self.SQL_SCOPE_HEAD.replace(" FROM click", f", {column} FROM click", 1)
        groups: dict[str, list[tuple[int, int, int, int]]] = {}
        args: tuple = (campaign_id, start_ms, end_ms)
        sql = scope_sql(head, (), self.SQL_SCOPE_ORDER)
        if values is not None:
            if not values:
                return groups
            wanted = sorted(set(values))
            sql = scope_sql(
                head, (), f" AND {column} IN ({', '.join('?' * len(wanted))}){self.SQL_SCOPE_ORDER}"
            )
            args += tuple(wanted)
        cursor = self.conn.execute(sql, args)
        for click_id, created_at, is_bot, is_unique, value in cursor.fetchall():
            groups.setdefault(value, []).append((click_id, created_at, is_bot, is_unique))
        return groups

    def add_entry(self, entry: dict) -> None:
        """Record one cost set (migration 0017's columns)."""
        self.conn.execute(self.SQL_ADD_ENTRY, [entry.get(name) for name in _ENTRY_COLUMNS]).close()

    def add_entries(self, entries: list[dict]) -> None:
        """Record many cost sets in one statement batch (a spend sync's campaign-day)."""
        rows = [[entry.get(name) for name in _ENTRY_COLUMNS] for entry in entries]
        if rows:
            self.conn.executemany(self.SQL_ADD_ENTRY, rows).close()

    def entries(self, start_ms: int | None = None, end_ms: int | None = None) -> list[dict]:
        """The cost sets recorded, oldest first; with bounds, those whose range lies within them."""
        if start_ms is None:
            rows = self.conn.execute(self.SQL_ENTRIES + " ORDER BY id").fetchall()
        else:
            rows = self.conn.execute(self.SQL_ENTRIES_WITHIN + " ORDER BY id", (start_ms, end_ms)).fetchall()
        return [dict(zip(("id", *_ENTRY_COLUMNS), row, strict=True)) for row in rows]

    def spend_entries(self, connection_id: int, start_ms: int, end_ms: int) -> list[dict]:
        """The cost sets a spend connection wrote that start in [start_ms, end_ms), oldest first."""
        rows = self.conn.execute(self.SQL_SPEND_ENTRIES + " ORDER BY id", (connection_id, start_ms, end_ms))
        return [dict(zip(("id", *_ENTRY_COLUMNS), row, strict=True)) for row in rows.fetchall()]

    def drop_entries(self, ids: list[int]) -> None:
        if not ids:
            return
        self.conn.executemany(self.SQL_DROP_ENTRY, [(i,) for i in ids]).close()

    def unrated_entries(self, currency: str, report: str) -> list[tuple[int, int, float]]:
        """(id, start, amount) of the cost sets in `currency` recorded with no rate into `report`."""
        return self.conn.execute(self.SQL_UNRATED_ENTRIES, (currency, report)).fetchall()

    def set_report_amounts(self, amounts: list[tuple[float, int]]) -> None:
        """(report amount, cost set id) of cost sets whose currency has a rate now."""
        if amounts:
            self.conn.executemany(self.SQL_SET_REPORT_AMOUNT, amounts).close()

    def poisoned_hours(self, campaign_id: int, start_ms: int, end_ms: int, limit: float) -> list[int]:
        """The hours from start_ms to end_ms whose campaign rollup holds a click cost beyond `limit`
        (or Infinity)."""
        rows = self.conn.execute(self.SQL_POISONED_HOURS, (campaign_id, start_ms, end_ms, limit)).fetchall()
        return [row[0] for row in rows]

    def add_unrated(self, rows: list[tuple[int, int, str, float]]) -> None:
        """Each (click id, its created_at, currency, amount): the click's cost, waiting for a rate."""
        if rows and self.is_unrated_present():
            self.conn.executemany(self.SQL_ADD_UNRATED, rows).close()

    def add_unrated_by_subid(self, rows: list[tuple[str, float, str]]) -> None:
        """Each (currency, amount, subid): the cost of a click just landed, waiting for a rate."""
        if rows and self.is_unrated_present():
            self.conn.executemany(self.SQL_ADD_UNRATED_BY_SUBID, rows).close()

    def is_unrated_present(self) -> bool:
        """Whether the database has migration 0034's table of costs waiting for a rate."""
        return fetch_one(self.conn, self.SQL_UNRATED_PRESENT) is not None

    def has_unrated(self) -> bool:
        """Whether any click's cost waits for a rate."""
        return self.is_unrated_present() and fetch_one(self.conn, self.SQL_ANY_UNRATED) is not None

    def unrated_currencies(self) -> list[str]:
        return [row[0] for row in self.conn.execute(self.SQL_UNRATED_CURRENCIES).fetchall()]

    def drop_unrated(self, click_ids: list[int]) -> None:
        """These clicks' costs wait for a rate no more (they were set again, or converted).

        PERF: one look at the (nearly always empty) table spares a spread its deletes."""
        if click_ids and self.has_unrated():
            self.conn.executemany(self.SQL_DROP_UNRATED, [(i,) for i in click_ids]).close()

    def unrated_between(
        self, currency: str, start: int | None, end: int | None
    ) -> list[tuple[int, int, float]]:
        """(click id, created_at, amount) of the costs in `currency` waiting for a rate, of clicks
        created in [start, end) (None: no bound)."""
        bounds = (-(1 << 62) if start is None else start, (1 << 62) if end is None else end)
        return self.conn.execute(self.SQL_UNRATED_BETWEEN, (currency, *bounds)).fetchall()

    def backfill_state(self) -> tuple[str, int, int] | None:
        """(state, position, target) of the rollup backfill's deferred step; None if there is none."""
        return fetch_one(self.conn, self.SQL_BACKFILL_STATE)

    def rebuild_click_costs(
        self, campaign_id: int, hours: list[int], days: list[int], position: int, target: int
    ) -> None:
        """Set the click cost of the campaign's rollup rows of these hours (hourly tables) and days
        (daily tables) to their raw clicks' sum, leaving out the ids in (position, target]: on one
        partial of each key, the others' to 0 (rebuild_sql)."""
        for width, sql in self.SQL_REBUILD.values():
            periods = hours if width == HOUR_MS else days
            self.conn.executemany(
                sql, [(position, target, campaign_id, period) for period in periods]
            ).close()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_SCOPE_HEAD: str
    SQL_SCOPE_ORDER: str
    SQL_CHUNK: str
    SQL_REBUILD: dict

    @abstractmethod
    def chunk(self, ids: list[int]) -> list[tuple]:
        """(id, cost, created_at, DIMENSIONS...) of these clicks."""

    def set_costs(self, updates: list[tuple[float, int]]) -> None:
        """Each (cost, click id); the columnar history copies the clicks again."""
        self._write_costs(updates)
        HistoryStore(self.conn).record_changes([click_id for _, click_id in updates])

    @abstractmethod
    def _write_costs(self, updates: list[tuple[float, int]]) -> None:
        """Each (cost, click id)."""
