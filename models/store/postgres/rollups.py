"""rollups on PostgreSQL: SQLite's statements, but for the catalog reads.

- PRAGMA table_info and sqlite_master are SQLite's catalog: information_schema is PostgreSQL's (the
  current schema's tables only, as sqlite_master holds only the database's own).
- The backfill sums click costs with models/store/postgres/sums.py's float_sum (Infinity past the
  largest double, as SQLite's SUM), not a SUM that refuses to overflow.
"""

from __future__ import annotations

from models.store import rollups as base
from models.store.postgres.sums import float_sum
from models.tables.dimensions import TABLES


class RollupStore(base.RollupStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_CLICK_ROLLUPS = {
        table: base.select_click_rollup(width, positions, float_sum) for table, width, positions in TABLES
    }
    # (position, name) as PRAGMA table_info's first two columns: the caller reads the name.
    SQL_CONVERSION_COLUMNS = (
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'conversion'"
    )
    MONEY_SUM = staticmethod(float_sum)
    SQL_ROLLUP_COLUMNS = (
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'rollup_hour'"
    )
    SQL_TABLE_NAMES = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name LIKE 'rollup%'"
    )
