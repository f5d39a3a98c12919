"""rollups on PostgreSQL: SQLite's statements, but for the catalog reads.

- PRAGMA table_info and sqlite_master are SQLite's catalog: information_schema is PostgreSQL's (the
  current schema's tables only, as sqlite_master holds only the database's own).
"""

from __future__ import annotations

from models.store.sqlite import rollups as sqlite


class RollupStore(sqlite.RollupStore):
    __slots__ = ()
    dialect = "postgres"
    # (position, name) as PRAGMA table_info's first two columns: the caller reads the name.
    SQL_CONVERSION_COLUMNS = (
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'conversion'"
    )
    SQL_TABLE_NAMES = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name LIKE 'rollup%'"
    )
