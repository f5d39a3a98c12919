"""rollups on PostgreSQL: what differs from models/store/sqlite/rollups.py (only what postbacks and
costs need so far; the backfill's PRAGMA and sqlite_master statements are still SQLite's).

- In an upsert's DO UPDATE the stored row's metrics are qualified with the table's name: PostgreSQL
  calls an unqualified one ambiguous between the row and `excluded`, where SQLite takes the row's.
"""

from __future__ import annotations

from models.reporting.dimensions import DIMENSIONS, METRICS, TABLES
from models.store.sqlite import rollups as sqlite


def _upsert_sql(table: str, dimensions: tuple[str, ...]) -> str:
    columns = ("period", *dimensions, *METRICS)
    updates = ", ".join(f"{metric} = {table}.{metric} + excluded.{metric}" for metric in METRICS)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
        f"ON CONFLICT (period, {', '.join(dimensions)}) DO UPDATE SET {updates}"
    )


class RollupStore(sqlite.RollupStore):
    """The rollups of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_UPSERT = {
        table: _upsert_sql(table, tuple(DIMENSIONS[i] for i in positions)) for table, _, positions in TABLES
    }
