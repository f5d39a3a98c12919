"""rollups on SQLite: what differs from PostgreSQL (models/store/postgres/rollups.py); the rest is
models/store/rollups.py's."""

from __future__ import annotations

from models.store import rollups as base
from models.store.sqlite.sums import float_sum
from models.tables.dimensions import TABLES


class RollupStore(base.RollupStore):
    __slots__ = ()
    dialect = "sqlite"
    # table -> the rows of its upsert summed from the clicks with ? < id <= ?.
    SQL_CLICK_ROLLUPS = {
        table: base.select_click_rollup(width, positions, float_sum) for table, width, positions in TABLES
    }
    SQL_CONVERSION_COLUMNS = "PRAGMA table_info(conversion)"
    SQL_TABLE_NAMES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rollup%'"
    SQL_ROLLUP_COLUMNS = "PRAGMA table_info(rollup_hour)"  # (cid, name, ...) per column.
    MONEY_SUM = staticmethod(float_sum)
