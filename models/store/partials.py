"""Folding the nodes' partials of a closed day into partial 0 (issue 33, point 2; migration 0036's rows).

Each node's flusher adds onto its own partial of the cap counters (`click_counter`) and the six
rollup tables, and every reader sums the partials, so a report over a week of the detail cube reads a
row per key and node. Once a day is closed, its partials are summed into partial 0 and deleted, one
table's day per transaction: a reader summing the partials sees the same sums before and after.

The rows a fold changes are locked in the one global order every writer keeps (models/store/rows.py
in_lock_order: a table's rows by key, `node` last), so a fold can wait on a flusher or a flusher on a
fold, never both. What differs by dialect is how (models/store/sqlite/, models/store/postgres/).
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.rows import Store
from models.tables.dimensions import DIMENSIONS, METRICS, MONEY_METRICS, TABLES

COUNTER = "click_counter"


class Folded:
    """What a fold reads of one table: the column a day's range is over, the key before `node`, and
    the columns summed (money ones summed as money: Infinity past the largest double on PostgreSQL)."""

    __slots__ = ("day_column", "key", "metrics", "table")

    def __init__(self, table: str, day_column: str, key: tuple[str, ...], metrics: tuple[str, ...]) -> None:
        self.table, self.day_column, self.key, self.metrics = table, day_column, key, metrics

    def merge_sql(self, source: str, where: str, money_sum) -> str:
        """Add the partials of `source` (a table or a CTE's name) matching `where`, summed per key, onto
        partial 0 of this table."""
        t = self.table
        sums = ", ".join(money_sum(m) if m in MONEY_METRICS else f"SUM({m})" for m in self.metrics)
        key = ", ".join(self.key)
        updates = ", ".join(f"{m} = {t}.{m} + excluded.{m}" for m in self.metrics)
        return (
            f"INSERT INTO {t} ({key}, {', '.join(self.metrics)}, node) "
            f"SELECT {key}, {sums}, 0 FROM {source} WHERE {where} GROUP BY {key} "
            f"ON CONFLICT ({key}, node) DO UPDATE SET {updates}"
        )


# Click counters first, then the rollups in TABLES' order: the order every flusher adds onto them in.
FOLDED = {
    COUNTER: Folded(COUNTER, "day", ("scope", "ref_id", "day"), ("clicks",)),
    **{
        table: Folded(table, "period", ("period", *(DIMENSIONS[i] for i in positions)), METRICS)
        for table, _, positions in TABLES
    },
}
# The text columns of the keys: PostgreSQL orders them by its collation unless told to order by code
# point, as Python's sort (in_lock_order) does.
TEXT_COLUMNS = frozenset({"scope", "source", "country", "device_type", "os", "browser", "language"})
IN_RANGE = "{column} >= ? AND {column} < ?"


class PartialStore(Store):
    """The partial rows of one connection; every method joins the caller's transaction."""

    __slots__ = ()

    # table -> the days (a rollup's UTC day start in ms; a counter's local YYYYMMDD) of
    # [?, ?) holding a partial other than 0.
    SQL_PARTIAL_DAYS = {
        table: (
            f"SELECT DISTINCT {'day' if table == COUNTER else 'period - period % 86400000'} FROM {table} "
            f"WHERE {IN_RANGE.format(column=folded.day_column)} AND node <> 0"
        )
        for table, folded in FOLDED.items()
    }

    def partial_days(self, table: str, start: int, end: int) -> list[int]:
        """The days of `table` in [start, end) (ms for a rollup, YYYYMMDD for the counters) that hold
        a partial other than 0, in order."""
        return sorted(row[0] for row in self.conn.execute(self.SQL_PARTIAL_DAYS[table], (start, end)))

    @abstractmethod
    def fold(self, table: str, start: int, end: int) -> int:
        """Sum the partials of each key of `table` in [start, end) into partial 0 and delete the others;
        returns the rows deleted. Exact for a concurrent reader at every instant: it runs in the
        caller's one transaction."""

    @abstractmethod
    def add_missing_zeros(self, table: str, start: int, end: int) -> None:
        """A partial 0 of zeros for each key of [start, end) that has partials but none 0."""
