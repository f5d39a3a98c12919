"""rollups: SQLite's statements (models/store/sqlite/rollups.py) on PostgreSQL, but for the upsert.

What differs (so far; ported for the spool flusher, which adds every landed click here): an upsert's
DO UPDATE names the table's own column (`rollup_hour.clicks + excluded.clicks`); PostgreSQL finds a
bare `clicks` there ambiguous, SQLite takes it as the table's.
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
    __slots__ = ()
    dialect = "postgres"
    SQL_UPSERT = {
        table: _upsert_sql(table, tuple(DIMENSIONS[i] for i in positions)) for table, _, positions in TABLES
    }
