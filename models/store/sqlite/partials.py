"""partials on SQLite: one writer at a time holds the database's write lock for the fold's whole
transaction, so the fold is one statement summing a day's partials into partial 0 and one deleting
them; no row locks to order."""

from __future__ import annotations

from models.store import partials as base
from models.store.sqlite.sums import float_sum


class PartialStore(base.PartialStore):
    __slots__ = ()
    dialect = "sqlite"

    # table -> the day's partials other than 0 added onto partial 0 (made where missing).
    SQL_MERGE = {
        table: folded.merge_sql(
            table, base.IN_RANGE.format(column=folded.day_column) + " AND node <> 0", float_sum
        )
        for table, folded in base.FOLDED.items()
    }
    SQL_DELETE = {
        table: f"DELETE FROM {table} WHERE {base.IN_RANGE.format(column=folded.day_column)} AND node <> 0"
        for table, folded in base.FOLDED.items()
    }

    def fold(self, table: str, start: int, end: int) -> int:
        self.conn.execute(self.SQL_MERGE[table], (start, end)).close()
        cursor = self.conn.execute(self.SQL_DELETE[table], (start, end))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    def add_missing_zeros(self, table: str, start: int, end: int) -> None:
        """Nothing to do: SQLite's fold makes the row of partial 0 in its own transaction, holding the
        only write lock."""
