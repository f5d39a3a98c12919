"""Click costs: the campaigns' cost models, a period's clicks and their costs, and the rebuild of the
rollups' click costs from raw clicks.

The rules (a click's cost under each model, how an amount is spread, which rollup rows are past
moving by a difference) are models/reporting/costs.py's.
"""

from __future__ import annotations

from models.choices import SUB_ID_SLOTS
from models.reporting.dimensions import DIMENSIONS, HOUR_MS, TABLES

# The click columns a spend can be set for besides the campaign (a traffic source's placement, a sub id).
COST_COLUMNS = ("source", *(f"sub_id_{n}" for n in range(1, SUB_ID_SLOTS + 1)))
from models.store.sqlite.rows import Store, fetch_one, float_sum


def rebuild_sql(table: str, width: int, dimensions: tuple[str, ...], money_sum=float_sum) -> str:
    match = " AND ".join(
        f"COALESCE(c.{name}, 0) = r.{name}" if name in ("stream_id", "offer_id") else f"c.{name} = r.{name}"
        for name in dimensions
    )
    return (
        f"UPDATE {table} AS r SET click_cost = COALESCE((SELECT {money_sum('c.cost')} FROM click AS c "
        f"WHERE c.created_at >= r.period AND c.created_at < r.period + {width} AND {match} "
        f"AND (c.id <= ? OR c.id > ?)), 0) WHERE r.campaign_id = ? AND r.period = ?"
    )


_PERIOD_CLICKS = (
    "SELECT id FROM click INDEXED BY click_campaign_created_at "
    "WHERE campaign_id = ? AND created_at >= ? AND created_at < ?{} ORDER BY created_at"
)


class CostStore(Store):
    """The click costs of one connection; writes join the caller's transaction."""

    SQL_CAMPAIGN_COSTS = "SELECT id, cost_model, cost_value, cost_currency FROM campaign"
    SQL_PERIOD_CLICKS = _PERIOD_CLICKS.format("")
    # column -> the same for the clicks with one value in that column (COST_COLUMNS only: never user text).
    SQL_PERIOD_CLICKS_OF = {column: _PERIOD_CLICKS.format(f" AND {column} = ?") for column in COST_COLUMNS}
    # {}: one ? per id.
    SQL_CHUNK = f"SELECT id, cost, created_at, {', '.join(DIMENSIONS)} FROM click WHERE id IN ({{}})"
    SQL_SET_COST = "UPDATE click SET cost = ? WHERE id = ?"
    SQL_POISONED_HOURS = (
        "SELECT period FROM rollup_campaign_hour WHERE campaign_id = ? AND period >= ? AND period < ? "
        "AND NOT abs(click_cost) <= ?"  # Infinity too
    )
    SQL_BACKFILL_STATE = "SELECT state, position, target FROM deferred_step WHERE name = 'rollup_backfill'"
    # table -> (its period width, the statement setting a row's click cost to its raw clicks' sum)
    SQL_REBUILD = {
        table: (width, rebuild_sql(table, width, tuple(DIMENSIONS[i] for i in positions)))
        for table, width, positions in TABLES
    }

    __slots__ = ()

    def campaign_costs(self) -> list[tuple[int, str, float, str]]:
        """(campaign id, cost model, cost value, cost currency) of every campaign."""
        return self.conn.execute(self.SQL_CAMPAIGN_COSTS).fetchall()

    def period_clicks(
        self, campaign_id: int, start_ms: int, end_ms: int, where: tuple[str, str] | None = None
    ) -> list[int]:
        """The ids of the campaign's clicks in [start_ms, end_ms), oldest first; `where` (column in
        COST_COLUMNS, value): only those with that value."""
        if where is None:
            rows = self.conn.execute(self.SQL_PERIOD_CLICKS, (campaign_id, start_ms, end_ms)).fetchall()
        else:
            sql = self.SQL_PERIOD_CLICKS_OF[where[0]]
            rows = self.conn.execute(sql, (campaign_id, start_ms, end_ms, where[1])).fetchall()
        return [row[0] for row in rows]

    def chunk(self, ids: list[int]) -> list[tuple]:
        """(id, cost, created_at, DIMENSIONS...) of these clicks."""
        return self.conn.execute(self.SQL_CHUNK.format(",".join("?" * len(ids))), ids).fetchall()

    def set_costs(self, updates: list[tuple[float, int]]) -> None:
        """Each (cost, click id)."""
        self.conn.executemany(self.SQL_SET_COST, updates).close()

    def poisoned_hours(self, campaign_id: int, start_ms: int, end_ms: int, limit: float) -> list[int]:
        """The hours from start_ms to end_ms whose campaign rollup holds a click cost beyond `limit`
        (or Infinity)."""
        rows = self.conn.execute(self.SQL_POISONED_HOURS, (campaign_id, start_ms, end_ms, limit)).fetchall()
        return [row[0] for row in rows]

    def backfill_state(self) -> tuple[str, int, int] | None:
        """(state, position, target) of the rollup backfill's deferred step; None if there is none."""
        return fetch_one(self.conn, self.SQL_BACKFILL_STATE)

    def rebuild_click_costs(
        self, campaign_id: int, hours: list[int], days: list[int], position: int, target: int
    ) -> None:
        """Set the click cost of the campaign's rollup rows of these hours (hourly tables) and days
        (daily tables) to their raw clicks' sum, leaving out the ids in (position, target]."""
        for width, sql in self.SQL_REBUILD.values():
            periods = hours if width == HOUR_MS else days
            self.conn.executemany(
                sql, [(position, target, campaign_id, period) for period in periods]
            ).close()
