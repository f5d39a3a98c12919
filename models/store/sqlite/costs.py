"""costs on SQLite: what differs from PostgreSQL (models/store/postgres/costs.py); the rest is
models/store/costs.py's."""

from __future__ import annotations

from models.store import costs as base
from models.store.sqlite.sums import float_sum
from models.tables.dimensions import DIMENSIONS, TABLES


class CostStore(base.CostStore):
    __slots__ = ()
    dialect = "sqlite"
    # A scope's clicks: (id, created_at, is_bot, is_unique_campaign), written per filter columns by scope_sql.
    SQL_SCOPE_HEAD = (
        "SELECT id, created_at, is_bot, is_unique_campaign FROM click INDEXED BY click_campaign_created_at"
    )
    SQL_SCOPE_ORDER = " ORDER BY created_at"
    SQL_SET_COST = "UPDATE click SET cost = ? WHERE id = ?"
    # {}: one ? per id.
    SQL_CHUNK = f"SELECT id, cost, created_at, {', '.join(DIMENSIONS)} FROM click WHERE id IN ({{}})"
    # table -> (its period width, the statement setting a row's click cost to its raw clicks' sum)
    SQL_REBUILD = {
        table: (width, base.rebuild_sql(table, width, tuple(DIMENSIONS[i] for i in positions), float_sum))
        for table, width, positions in TABLES
    }

    def chunk(self, ids: list[int]) -> list[tuple]:
        """(id, cost, created_at, DIMENSIONS...) of these clicks."""
        return self.conn.execute(self.SQL_CHUNK.format(",".join("?" * len(ids))), ids).fetchall()

    def _write_costs(self, updates: list[tuple[float, int]]) -> None:
        """Each (cost, click id)."""
        self.conn.executemany(self.SQL_SET_COST, updates).close()
