"""costs on PostgreSQL: what differs from SQLite (models/store/sqlite/costs.py);
the rest is models/store/costs.py's.

- SQLite's `INDEXED BY click_campaign_created_at` is dropped (PostgreSQL's planner picks the index),
  and a period's clicks with the same created_at are ordered by id, as SQLite's index returns them:
  the last one takes the rounding remainder of a spread cost, so both dialects give it to one click.
- A chunk's costs are written in one UPDATE from arrays (unnest), and its clicks read with `= ANY(?)`:
  PERF: 5,000 single-row UPDATEs were a round trip each, ~25 s for a spread over 200k clicks and a
  1.2 s transaction per chunk; as arrays the spread takes a few seconds (docs/PERFORMANCE.md).
- A rollup row's click cost is rebuilt with models/store/postgres/sums.py's float_sum (Infinity past
  the largest double, as SQLite's SUM): the repair of poisoned costs must not fail on them.
"""

from __future__ import annotations

from models.store import costs as base
from models.store.postgres.sums import float_sum
from models.tables.dimensions import DIMENSIONS, TABLES


class CostStore(base.CostStore):
    """The click costs of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_CHUNK = f"SELECT id, cost, created_at, {', '.join(DIMENSIONS)} FROM click WHERE id = ANY(?)"
    SQL_SET_COSTS = (
        "UPDATE click SET cost = spread.cost FROM unnest(CAST(? AS DOUBLE PRECISION[]), CAST(? AS BIGINT[])) "
        "AS spread (cost, id) WHERE click.id = spread.id"
    )
    SQL_SCOPE_HEAD = "SELECT id, created_at, is_bot, is_unique_campaign FROM click"
    SQL_SCOPE_ORDER = " ORDER BY created_at, id"
    SQL_REBUILD = {
        table: (width, base.rebuild_sql(table, width, tuple(DIMENSIONS[i] for i in positions), float_sum))
        for table, width, positions in TABLES
    }

    def chunk(self, ids: list[int]) -> list[tuple]:
        return self.conn.execute(self.SQL_CHUNK, (list(ids),)).fetchall()

    def _write_costs(self, updates: list[tuple[float, int]]) -> None:
        costs, ids = zip(*updates, strict=True) if updates else ((), ())
        self.conn.execute(self.SQL_SET_COSTS, (list(costs), list(ids))).close()
