"""rollups on PostgreSQL: SQLite's statements, but for the upsert and the catalog reads.

- An upsert's DO UPDATE names the stored row's column as `table.col`: PostgreSQL finds a bare `col`
  ambiguous between the row and `excluded`, where SQLite takes the row's.
- PRAGMA table_info and sqlite_master are SQLite's catalog: information_schema is PostgreSQL's (the
  current schema's tables only, as sqlite_master holds only the database's own).
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
    # (position, name) as PRAGMA table_info's first two columns: the caller reads the name.
    SQL_CONVERSION_COLUMNS = (
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'conversion'"
    )
    SQL_TABLE_NAMES = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name LIKE 'rollup%'"
    )
