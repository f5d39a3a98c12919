"""The rollup tables (`rollup_hour`, `rollup_day`, `rollup_campaign_hour`, `rollup_campaign_day`,
`rollup_campaign_country_hour`, `rollup_campaign_country_day`): changes added onto their rows, a
conversion's click key, and the deferred backfill's statements.

What a click or a conversion adds and how a change folds into each table are
models/reporting/rollups.py's; the tables' layout is models/tables/dimensions.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from models.store.rows import Store, fetch_one, in_lock_order
from models.tables.dimensions import CONVERSION_METRICS, DIMENSIONS, LP_METRICS, METRICS, TABLES

# A click's LP view and LP click (migration 0016) summed over raw clicks (`{c}`: the table's prefix),
# as the rollups and the raw reports count them.
LP_SUMS = (
    "SUM(CASE WHEN {c}lander_id IS NULL THEN 0 ELSE 1 END), "
    "SUM(CASE WHEN {c}lander_id IS NULL OR {c}lp_clicked_at IS NULL THEN 0 ELSE 1 END)"
)


def _upsert_sql(
    table: str, dimensions: tuple[str, ...], metrics: tuple[str, ...] = METRICS, *, is_partial: bool = True
) -> str:
    """`is_partial`: the table has migration 0036's `node` (the writer's partial, bound last, in its key)."""
    node = ("node",) if is_partial else ()
    columns = ("period", *dimensions, *metrics, *node)
    # The stored row's column qualified: PostgreSQL finds a bare one ambiguous beside `excluded`.
    updates = ", ".join(f"{metric} = {table}.{metric} + excluded.{metric}" for metric in metrics)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
        f"ON CONFLICT (period, {', '.join((*dimensions, *node))}) DO UPDATE SET {updates}"
    )


def select_click_rollup(
    width: int, positions: tuple[int, ...], money_sum: Callable[[str], str], *, lp: bool = True
) -> str:
    """`lp`: with migration 0016's LP metrics (a database before it has neither them nor 0015's columns)."""
    names = [DIMENSIONS[i] for i in positions]
    dims = ", ".join(f"COALESCE({d}, 0)" if d in ("stream_id", "offer_id") else d for d in names)
    lp_sums = f"{LP_SUMS.format(c='')}, " if lp else ""
    return f"""
SELECT created_at - created_at % {width}, {dims}, COUNT(*), SUM(is_unique_global), SUM(is_unique_campaign),
    SUM(is_unique_stream), SUM(is_bot), {money_sum("cost")}, {lp_sums}
    {", ".join("0" * len(CONVERSION_METRICS))}
FROM click WHERE id > ? AND id <= ? GROUP BY 1, {", ".join(str(n) for n in range(2, len(names) + 2))}
"""


_TABLE_DIMENSIONS = {table: tuple(DIMENSIONS[i] for i in positions) for table, _, positions in TABLES}


class RollupStore(Store):
    """The rollups of one connection; writes join the caller's transaction (a flush's, a postback's).

    Since migration 0036 a row is one writer's partial of its key (`node`, the last column of every
    table's key: models/clicks/node.py partial_number): each node's flusher adds onto its own, so
    flushers of one campaign never wait on each other's rows; readers sum the partials (a report
    groups by dimensions, never by `node`)."""

    # table -> its upsert of one row of (period, its dimensions, METRICS, node): added onto the row of
    # that key in partial `node`.
    SQL_UPSERT = {
        table: _upsert_sql(table, tuple(DIMENSIONS[i] for i in positions)) for table, _, positions in TABLES
    }
    # The click's columns a conversion's rollup key needs, in this order.
    SQL_CLICK_KEY = f"SELECT created_at, {', '.join(DIMENSIONS)} FROM click WHERE id = ?"
    SQL_CONVERSIONS_WITH_KEYS = f"""
SELECT cv.status, {{payout}}, cv.cost, c.created_at, {", ".join("c." + d for d in DIMENSIONS)}
FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id
"""

    __slots__ = ()

    def add(
        self,
        changes: Iterable[tuple[str, list[tuple]]],
        metrics: tuple[str, ...] = METRICS,
        node: int | None = 0,
    ) -> None:
        """Add each (table, rows of (period, its dimensions, `metrics`)) onto the table's rows of the
        partial `node` (None: a database before migration 0036, which has none), the tables in the
        order given (always TABLES' order) and each one's rows in key order (in_lock_order)."""
        for table, rows in changes:
            if metrics == METRICS and node is not None:
                sql = self.SQL_UPSERT[table]
            else:  # A database not migrated to the end (present_metrics, is_partial).
                sql = _upsert_sql(table, _TABLE_DIMENSIONS[table], metrics, is_partial=node is not None)
            rows = in_lock_order(rows, 1 + len(_TABLE_DIMENSIONS[table]))
            if node is not None:
                rows = [(*row, node) for row in rows]
            self.conn.executemany(sql, rows).close()

    def present_metrics(self) -> tuple[str, ...]:
        """METRICS, without migration 0016's LP metrics on a database not migrated to it yet."""
        columns = {row[1] for row in self.conn.execute(self.SQL_ROLLUP_COLUMNS).fetchall()}
        return tuple(metric for metric in METRICS if metric in columns or metric not in LP_METRICS)

    def is_partial(self) -> bool:
        """The rollup tables have migration 0036's `node` in their key."""
        return any(row[1] == "node" for row in self.conn.execute(self.SQL_ROLLUP_COLUMNS).fetchall())

    def click_key(self, click_id: int) -> tuple | None:
        """(created_at, DIMENSIONS...) of the click; None if it is not stored."""
        return fetch_one(self.conn, self.SQL_CLICK_KEY, (click_id,))

    def present_tables(self) -> tuple:
        """The entries of TABLES whose table exists."""
        names = {row[0] for row in self.conn.execute(self.SQL_TABLE_NAMES).fetchall()}
        return tuple(entry for entry in TABLES if entry[0] in names)

    def backfill_clicks(self, first_id: int, last_id: int, tables: tuple = TABLES) -> None:
        """Add the clicks with first_id < id <= last_id to every table of `tables` (the deferred
        backfill's chunk), onto partial 0 (the one every writer but a flusher adds onto)."""
        metrics, is_partial = self.present_metrics(), self.is_partial()
        for table, width, positions in tables:
            if metrics == METRICS and is_partial:
                select, upsert = self.SQL_CLICK_ROLLUPS[table], self.SQL_UPSERT[table]
            else:  # Before migration 0036 (and 0016, and 0015's columns).
                lp = metrics == METRICS
                select = select_click_rollup(width, positions, self.MONEY_SUM, lp=lp)
                upsert = _upsert_sql(table, _TABLE_DIMENSIONS[table], metrics, is_partial=is_partial)
            rows = self.conn.execute(select, (first_id, last_id)).fetchall()
            rows = in_lock_order(rows, 1 + len(positions))
            self.conn.executemany(upsert, [(*row, 0) for row in rows] if is_partial else rows).close()

    def conversions_with_keys(self) -> list[tuple]:
        """(status, payout in the report currency, cost, its click's created_at, DIMENSIONS...) of every
        stored conversion; a payout with no rate yet is 0."""
        # A database migrated only up to before currencies (0007) sums payouts as they came, as its
        # release did; 0007 then takes the unconverted ones out.
        columns = {row[1] for row in self.conn.execute(self.SQL_CONVERSION_COLUMNS).fetchall()}
        payout = "COALESCE(cv.report_payout, 0)" if "report_payout" in columns else "cv.payout"
        return self.conn.execute(self.SQL_CONVERSIONS_WITH_KEYS.format(payout=payout)).fetchall()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_CLICK_ROLLUPS: dict
    SQL_CONVERSION_COLUMNS: str
    SQL_TABLE_NAMES: str
    SQL_ROLLUP_COLUMNS: str
    MONEY_SUM: Callable[[str], str]
