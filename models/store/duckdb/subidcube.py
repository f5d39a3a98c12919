"""The sub id cube of the columnar history (docs/analytics.md, "The sub id cube"): per closed UTC day,
the click sums of `click` by (campaign_id, country, sub id slot, the slot's value), so a report by zone
(or creative, placement ...) of a campaign, a country or all of them reads thousands of pre-summed rows
a day instead of millions of clicks.

- `subid_cube (day, campaign_id, country, slot, value, <CUBE_METRICS>)`: slot 0 holds each (campaign,
  country)'s totals with the value ''; slot N (1-30) the sums by sub_id_N, kept for a day only where the
  slot has a value there and not too many of them (KEEP_ROWS_PER_CLICKS): a slot filled with one value
  a click (a source's own click id) would make the cube as big as the clicks.
- `subid_cube_day (day, kept, empty, clicks, stale)`: one row a day built: `kept`, the bit mask of the
  slots with rows; `empty`, of those with no value that day (a report by such a slot reads slot 0's
  rows, all of value ''); a slot in neither (too many values) is the raw clicks' to answer.

The invariant every writer keeps: the rows of a day not `stale` are the sums of exactly the rows the
`click` table holds for that day. So it is built for a day in one transaction (its old rows deleted,
the new ones summed, its day row written), and every statement that changes a day's clicks other than
compaction's (which moves rows, never changing which) marks that day stale in the same transaction
(models/store/duckdb/history.py: a copy again, a repair, a cut back): a kill at any instant leaves a day
whole or stale, never half-counted; a stale day is read from the raw clicks until it is built again.
"""

from __future__ import annotations

from typing import Any

from models.store.rollups import LP_SUMS
from models.tables.click import SUB_ID_COLUMNS
from models.tables.dimensions import CLICK_METRICS, DAY_MS

SLOTS = len(SUB_ID_COLUMNS)
# The click sums it keeps: the rollups' click metrics, in models/store/reports.py `click_sums`' order.
CUBE_METRICS = CLICK_METRICS
_SUMS = (
    "COUNT(*), SUM(is_unique_global), SUM(is_unique_campaign), SUM(is_unique_stream), SUM(is_bot), "
    f"SUM(cost), {LP_SUMS.format(c='')}"
)
# A slot is kept for a day only if its rows are at most this share of the day's clicks (or few): a row
# must pre-sum several clicks to be worth reading instead of them.
KEEP_ROWS_PER_CLICKS = 0.5
KEEP_ROWS_ANYWAY = 5_000


# The click columns the cube's sums depend on: a copy again that changes none of them (a click put back
# in the row store for a late postback, copied again as it was) leaves its day's sums as they were.
SUMMED_COLUMNS = (
    "created_at",
    "campaign_id",
    "country",
    *SUB_ID_COLUMNS,
    "is_unique_global",
    "is_unique_campaign",
    "is_unique_stream",
    "is_bot",
    "cost",
    "lander_id",
    "lp_clicked_at",
)


def mask(slots: set[int] | list[int]) -> int:
    bits = 0
    for slot in slots:
        bits |= 1 << slot
    return bits


class SubidCube:
    """The cube's statements over the history's DuckDB connection."""

    SQL_SCHEMA = (
        "CREATE TABLE IF NOT EXISTS subid_cube (day BIGINT NOT NULL, campaign_id INTEGER, country VARCHAR, "
        "slot TINYINT NOT NULL, value VARCHAR, clicks BIGINT, unique_global BIGINT, unique_campaign BIGINT, "
        "unique_stream BIGINT, bots BIGINT, click_cost DOUBLE, lp_views BIGINT, lp_clicks BIGINT)",
        # No primary key: a day's row is deleted and written again in one transaction, which DuckDB's
        # unique indexes refuse for the same key; the one writer keeps it unique.
        "CREATE TABLE IF NOT EXISTS subid_cube_day (day BIGINT NOT NULL, kept BIGINT NOT NULL, "
        "empty BIGINT NOT NULL, clicks BIGINT NOT NULL, stale BOOLEAN NOT NULL DEFAULT false)",
    )
    SQL_HAS_CUBE = (
        "SELECT COUNT(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND table_name = 'subid_cube_day'"
    )
    SQL_DAY_SLOTS = (
        "SELECT COUNT(*), "
        + ", ".join(f"bool_or({column} <> '')" for column in SUB_ID_COLUMNS)
        + " FROM click WHERE created_at >= ? AND created_at < ?"
    )
    SQL_DELETE_DAY_ROWS = "DELETE FROM subid_cube WHERE day = ?"
    SQL_DELETE_DAY = "DELETE FROM subid_cube_day WHERE day = ?"
    SQL_INSERT_DAY = "INSERT INTO subid_cube_day (day, kept, empty, clicks, stale) VALUES (?, ?, ?, ?, false)"
    SQL_TOTALS = (
        f"INSERT INTO subid_cube SELECT ?, campaign_id, country, 0, '', {_SUMS} FROM click "
        "WHERE created_at >= ? AND created_at < ? GROUP BY campaign_id, country ORDER BY campaign_id, country"
    )
    SQL_SLOT = (
        "INSERT INTO subid_cube SELECT ?, campaign_id, country, {slot}, {column}, "
        + _SUMS
        + " FROM click WHERE created_at >= ? AND created_at < ? GROUP BY campaign_id, country, {column} "
        "ORDER BY campaign_id, {column}, country"
    )
    SQL_DELETE_SLOT = "DELETE FROM subid_cube WHERE day = ? AND slot = ?"
    # Days built and not stale, in a range (those a report may read).
    SQL_DAYS = (
        "SELECT day, kept, empty FROM subid_cube_day WHERE NOT stale AND day >= ? AND day < ? ORDER BY day"
    )
    SQL_STALE_DAYS = "SELECT day FROM subid_cube_day WHERE stale ORDER BY day"
    SQL_LAST_DAY = "SELECT MAX(day) FROM subid_cube_day"
    SQL_STATUS = (
        "SELECT COUNT(*) FILTER (WHERE NOT stale), COUNT(*) FILTER (WHERE stale), "
        "MAX(day) FILTER (WHERE NOT stale) FROM subid_cube_day"
    )
    SQL_ROWS = "SELECT COUNT(*) FROM subid_cube"
    # The days with clicks from a moment on, before another (zone maps skip the rest).
    SQL_CLICK_DAYS = (
        f"SELECT DISTINCT created_at - created_at % {DAY_MS} AS day FROM click "
        "WHERE created_at >= ? AND created_at < ? ORDER BY day"
    )
    SQL_NEWEST_FROM = "SELECT MAX(created_at) FROM click WHERE created_at >= ?"
    SQL_MARK_DAYS = (
        "UPDATE subid_cube_day SET stale = true WHERE NOT stale "
        "AND day IN (SELECT unnest(CAST(? AS BIGINT[])))"
    )
    SQL_MARK_AFTER = (
        "UPDATE subid_cube_day SET stale = true WHERE NOT stale AND day IN ("
        f"SELECT DISTINCT created_at - created_at % {DAY_MS} FROM click WHERE id > ?)"
    )
    SQL_MARK_ALL = "UPDATE subid_cube_day SET stale = true WHERE NOT stale"
    # Per day built: the cube's clicks and cost (slot 0) against the click table's (analytics verify).
    SQL_CHECK = (
        "SELECT d.day, d.clicks, COALESCE(q.clicks, 0), COALESCE(q.cost, 0), COALESCE(c.clicks, 0), "
        "COALESCE(c.cost, 0) FROM subid_cube_day AS d "
        "LEFT JOIN (SELECT day, SUM(clicks) AS clicks, SUM(click_cost) AS cost FROM subid_cube "
        "WHERE slot = 0 GROUP BY day) AS q ON q.day = d.day "
        f"LEFT JOIN (SELECT created_at - created_at % {DAY_MS} AS day, COUNT(*) AS clicks, "
        "SUM(cost) AS cost FROM click WHERE created_at >= ? GROUP BY 1) AS c ON c.day = d.day "
        "WHERE NOT d.stale ORDER BY d.day"
    )
    SQL_FIRST_DAY = "SELECT MIN(day) FROM subid_cube_day WHERE NOT stale"

    __slots__ = ("conn",)

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def create(self) -> None:
        for statement in self.SQL_SCHEMA:
            self.conn.execute(statement)

    def exists(self) -> bool:
        """Whether the file has the cube's tables (a file made before them has none until an append)."""
        return bool(self.conn.execute(self.SQL_HAS_CUBE).fetchone()[0])

    def build_day(self, day: int) -> int:
        """Sum the day's clicks into the cube, in the caller's transaction (the day's old rows replaced);
        the rows written."""
        end = day + DAY_MS
        clicks, *has_value = self.conn.execute(self.SQL_DAY_SLOTS, (day, end)).fetchone()
        self.conn.execute(self.SQL_DELETE_DAY_ROWS, (day,))
        written = self.conn.execute(self.SQL_TOTALS, (day, day, end)).fetchone()[0]
        kept, empty = [0], []
        for slot, has in enumerate(has_value, start=1):
            if not has:
                empty.append(slot)
                continue
            column = SUB_ID_COLUMNS[slot - 1]
            rows = self.conn.execute(
                self.SQL_SLOT.format(slot=slot, column=column), (day, day, end)
            ).fetchone()[0]
            if rows > KEEP_ROWS_ANYWAY and rows > clicks * KEEP_ROWS_PER_CLICKS:
                self.conn.execute(self.SQL_DELETE_SLOT, (day, slot))  # Too many values: raw clicks answer.
                continue
            kept.append(slot)
            written += rows
        self.conn.execute(self.SQL_DELETE_DAY, (day,))
        self.conn.execute(self.SQL_INSERT_DAY, (day, mask(kept), mask(empty), clicks))
        return written

    def days_to_build(self, closed_before: int) -> list[int]:
        """The days before `closed_before` to build: those marked stale, and those with clicks after the
        last one built (a file without the cube: every day with clicks)."""
        is_made = self.exists()
        last = self.last_day() if is_made else None
        since = 0 if last is None else last + DAY_MS
        stale = self.conn.execute(self.SQL_STALE_DAYS).fetchall() if is_made else []
        days = [row[0] for row in stale if row[0] < closed_before]
        if since < closed_before:
            days += [
                row[0] for row in self.conn.execute(self.SQL_CLICK_DAYS, (since, closed_before)).fetchall()
            ]
        return sorted(set(days))

    def newest_from(self, moment: int) -> int | None:
        return self.conn.execute(self.SQL_NEWEST_FROM, (moment,)).fetchone()[0]

    def last_day(self) -> int | None:
        """The last day built (None: none, or no cube in the file)."""
        return self.conn.execute(self.SQL_LAST_DAY).fetchone()[0] if self.exists() else None

    def days(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """(day, kept mask, empty mask) of the days built and not stale in [start, end)."""
        return self.conn.execute(self.SQL_DAYS, (start, end)).fetchall()

    # The marks: each in the transaction of the change, before it (the days the old rows are in).
    def mark_days(self, days: list[int]) -> None:
        if days:
            self.conn.execute(self.SQL_MARK_DAYS, (sorted(set(days)),))

    SQL_ANY_BUILT = "SELECT COUNT(*) FROM subid_cube_day WHERE NOT stale"
    SQL_SUMMED = (
        f"SELECT id, {', '.join(SUMMED_COLUMNS)} FROM click WHERE id BETWEEN ? AND ? "
        "AND id IN (SELECT unnest(CAST(? AS BIGINT[])))"
    )

    def mark_changed(self, click_ids: list[int], rows: dict[int, tuple]) -> None:
        """Mark stale the days of the clicks `click_ids` whose copy is replaced by `rows` (click id -> its
        SUMMED_COLUMNS values; a click missing there is only deleted): the old copy's day, and the new
        one's, of each click whose summed values change. PERF: a copy again as it was marks nothing."""
        if not click_ids or not self.conn.execute(self.SQL_ANY_BUILT).fetchone()[0]:
            return
        bounds = (min(click_ids), max(click_ids), list(click_ids))
        held = self.conn.execute(self.SQL_SUMMED, bounds).fetchall()
        days = set()
        for click_id, *old in held:
            new = rows.get(click_id)
            if new is None or tuple(old) != tuple(new):
                days.add(old[0] - old[0] % DAY_MS)
                if new is not None:
                    days.add(new[0] - new[0] % DAY_MS)
        self.mark_days(sorted(days))

    def mark_after(self, position: int) -> None:
        self.conn.execute(self.SQL_MARK_AFTER, (position,))

    def mark_all(self) -> None:
        self.conn.execute(self.SQL_MARK_ALL)

    def status(self) -> tuple[int, int, int | None, int]:
        """(days built, days stale, the last day built (Unix ms) or None, the cube's rows)."""
        built, stale, last = self.conn.execute(self.SQL_STATUS).fetchone()
        return built, stale, last, self.conn.execute(self.SQL_ROWS).fetchone()[0]

    def check(self) -> list[tuple[int, int, int, float, int, float]]:
        """(day, the day row's clicks, the cube's clicks, its cost, the click table's clicks, its cost) of
        each day built and not stale."""
        first = self.conn.execute(self.SQL_FIRST_DAY).fetchone()[0]
        if first is None:
            return []
        return self.conn.execute(self.SQL_CHECK, (first,)).fetchall()
