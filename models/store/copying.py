"""Reading a whole database table by table for `lanner db copy` (models/ops/db_copy.py), and the
counts and sums that verify a copy.

A table is read in its primary key's order in batches by keyset pagination (`WHERE (key) > (last
key) ORDER BY key LIMIT n`): each batch is an index seek however far the copy has gone, and the last
key of a batch is all a resumed copy needs to go on. The statements are templates filled with the
table's own names, which come from the database's catalog, never from a user.

The copy reads one snapshot: `begin_snapshot()` opens a read transaction (WAL keeps it while the
tracker writes on), so the tables copied and the sums verified are of one moment.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass

from models.errors import LannerError
from models.store.rows import Store, fetch_one, fetch_single

NAME = re.compile(r"[a-z_][a-z0-9_]*")


class NotACopyTarget(LannerError):
    """A copy's writing asked of a SQLite database: `lanner db copy` writes into PostgreSQL only."""

    def __init__(self) -> None:
        super().__init__("A copy is written into a PostgreSQL database only, not into SQLite.")


@dataclass(frozen=True)
class TableShape:
    """A table's columns (in the database's order) and its primary key's columns (in key order)."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]


def quoted(name: str) -> str:
    """An identifier for a statement template: names come from the catalog and are plain, or refused."""
    if not NAME.fullmatch(name):
        raise ValueError(f"Unexpected table or column name {name!r}.")
    return f'"{name}"'


def names(columns) -> str:
    return ", ".join(quoted(column) for column in columns)


class CopyStore(Store):
    """Any table's rows in key order, and its measures, on one connection."""

    __slots__ = ()

    SQL_BEGIN_SNAPSHOT = "BEGIN"
    SQL_PIN_SNAPSHOT = "SELECT COUNT(*) FROM sqlite_master"  # A deferred BEGIN takes its snapshot here.
    SQL_END_SNAPSHOT = "ROLLBACK"
    SQL_READ_FIRST = "SELECT {columns} FROM {table} ORDER BY {key} LIMIT ?"
    SQL_READ_AFTER = "SELECT {columns} FROM {table} WHERE ({key}) > ({marks}) ORDER BY {key} LIMIT ?"
    SQL_MEASURE = "SELECT {aggregates} FROM {table}"
    # NOT (abs(x) <= ?): Infinity too; SQLite stores NaN as NULL, which is no number to add up.
    SQL_COUNT_BEYOND = "SELECT COUNT(*) FROM {table} WHERE {beyond}"

    def begin_snapshot(self) -> None:
        """Read everything after this from one snapshot of the database, until end_snapshot()."""
        self.conn.execute(self.SQL_BEGIN_SNAPSHOT).close()
        fetch_one(self.conn, self.SQL_PIN_SNAPSHOT)

    def end_snapshot(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute(self.SQL_END_SNAPSHOT).close()

    def read_after(self, table: TableShape, after: tuple | None, limit: int) -> list[tuple]:
        """Up to `limit` rows of `table` (its columns in its order) whose key comes after `after`
        (from the first when None), in key order."""
        if after is None:
            sql = self.SQL_READ_FIRST.format(
                columns=names(table.columns), table=quoted(table.name), key=names(table.key)
            )
            params: tuple = (limit,)
        else:
            sql = self.SQL_READ_AFTER.format(
                columns=names(table.columns),
                table=quoted(table.name),
                key=names(table.key),
                marks=", ".join("?" * len(table.key)),
            )
            params = (*after, limit)
        cursor = self.conn.execute(sql, params)
        try:
            return cursor.fetchall()
        finally:
            cursor.close()

    def measure(self, table: str, *, sums: tuple[str, ...] = (), maxima: tuple[str, ...] = ()) -> tuple:
        """(row count, the sum of each of `sums`, the largest of each of `maxima`) of `table`."""
        aggregates = ["COUNT(*)"]
        aggregates += [f"SUM({quoted(column)})" for column in sums]
        aggregates += [f"MAX({quoted(column)})" for column in maxima]
        return fetch_single(
            self.conn, self.SQL_MEASURE.format(aggregates=", ".join(aggregates), table=quoted(table))
        )

    def count_beyond(self, table: str, columns: tuple[str, ...], limit: float) -> int:
        """Rows of `table` holding, in any of `columns`, Infinity or a value beyond ±`limit`."""
        beyond = " OR ".join(f"NOT abs({quoted(column)}) <= ?" for column in columns)
        sql = self.SQL_COUNT_BEYOND.format(table=quoted(table), beyond=beyond)
        return fetch_single(self.conn, sql, (limit,) * len(columns))[0]

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_TABLES: str
    SQL_COLUMNS: str

    @abstractmethod
    def tables(self) -> dict[str, TableShape]:
        """Every table of the database by name (the database's own catalog tables left out)."""

    @abstractmethod
    def shape(self, table: str) -> TableShape: ...

    # The target's side: a copy is written into PostgreSQL only (models/store/postgres/copying.py), and
    # models/ops/db_copy.py refuses another target before it makes a store; SQLite's sibling refuses.

    def references(self) -> list[tuple[str, str]]:
        """(table, the table one of its foreign keys refers to) for every foreign key."""
        raise NotACopyTarget()

    def try_lock(self) -> bool:
        """Take this session's copy lock; False when another session holds it."""
        raise NotACopyTarget()

    def unlock(self) -> None:
        raise NotACopyTarget()

    def has_progress(self) -> bool:
        """Whether a copy was started into this database (its copy_progress table is there)."""
        raise NotACopyTarget()

    def start_progress(self, tables: list[str], source: str) -> None:
        """Create copy_progress with a row for each table to copy (in the caller's transaction)."""
        raise NotACopyTarget()

    def progress(self) -> dict[str, tuple[str, str | None, int, bool]]:
        """table -> (source, last key as JSON text or None, rows copied, whether done)."""
        raise NotACopyTarget()

    def save_progress(self, table: str, last_key: str | None, rows: int, is_done: bool) -> None:
        raise NotACopyTarget()

    def drop_progress(self) -> None:
        raise NotACopyTarget()

    def clear(self, table: str) -> None:
        """Delete every row of `table` (the rows a new database's baseline made, replaced by the copy)."""
        raise NotACopyTarget()

    def write_rows(self, table: TableShape, rows: list[tuple]) -> int:
        """Write `rows` (of table.columns) into the table in the caller's transaction; the number of
        text values whose NUL characters had to be removed."""
        raise NotACopyTarget()

    def move_sequences(self, tables: list[str]) -> None:
        """Move each identity sequence of `tables` past its column's largest value."""
        raise NotACopyTarget()

    def analyze(self, tables: list[str]) -> None:
        """Gather the planner's statistics now: a freshly filled table has none until autovacuum's turn."""
        raise NotACopyTarget()
