"""Click counts per stream and offer and local day (`click_counter`), and the timezones days are in.

The rules (what a day is, when a cap is reached) are models/routing/caps.py's.
"""

from __future__ import annotations

from collections.abc import Iterable

from models.store.rows import Store, fetch_single, in_lock_order


class CounterStore(Store):
    """The cap counters of one connection; `add` joins the flush's transaction.

    Since migration 0036 a row is one node's partial of its (scope, id, day) (`node`, the last column
    of the key: models/clicks/node.py partial_number), added onto by that node's flusher only; every
    read sums the partials."""

    SQL_TOTALS = "SELECT scope, ref_id, SUM(clicks) FROM click_counter GROUP BY scope, ref_id"
    SQL_DAYS = (
        "SELECT scope, ref_id, day, SUM(clicks) FROM click_counter WHERE day >= ? GROUP BY scope, ref_id, day"
    )
    # The stored row's column qualified: PostgreSQL finds a bare `clicks` ambiguous beside `excluded`.
    SQL_ADD = """
INSERT INTO click_counter (scope, ref_id, day, clicks, node) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (scope, ref_id, day, node) DO UPDATE SET clicks = click_counter.clicks + excluded.clicks
"""
    # Before migration 0036 (a database `lanner db migrate --to` an earlier one): one row per key.
    SQL_ADD_WHOLE = """
INSERT INTO click_counter (scope, ref_id, day, clicks) VALUES (?, ?, ?, ?)
ON CONFLICT (scope, ref_id, day) DO UPDATE SET clicks = click_counter.clicks + excluded.clicks
"""
    # One stream's or offer's clicks over all days and on one day (the primary key's prefix: no scan).
    SQL_USAGE = """
SELECT COALESCE(SUM(clicks), 0), COALESCE(SUM(CASE WHEN day = ? THEN clicks ELSE 0 END), 0)
FROM click_counter WHERE scope = ? AND ref_id = ?
"""
    SQL_STREAM_ZONES = (
        "SELECT stream.id, campaign.timezone FROM stream JOIN campaign ON campaign.id = stream.campaign_id"
    )
    SQL_OFFER_ZONES = "SELECT id, timezone FROM offer"

    __slots__ = ()

    def totals(self) -> Iterable[tuple[str, int, int]]:
        """(scope, id, clicks) over all days."""
        return self.conn.execute(self.SQL_TOTALS).fetchall()

    def days_since(self, day: int) -> Iterable[tuple[str, int, int, int]]:
        """(scope, id, day, clicks) of the days from `day` (YYYYMMDD) on, the nodes' partials summed."""
        return self.conn.execute(self.SQL_DAYS, (day,)).fetchall()

    def usage(self, scope: str, ref: int, day: int) -> tuple[int, int]:
        """(clicks on `day`, clicks over all days) of one stream or offer."""
        total, on_day = fetch_single(self.conn, self.SQL_USAGE, (day, scope, ref))
        return int(on_day), int(total)

    def add(self, increments: Iterable[tuple[str, int, int, int]], node: int | None = 0) -> None:
        """Add (scope, id, day, clicks) to the counters' partial `node` (the flusher's own; None: a
        database before migration 0036), in key order (in_lock_order: a node's flusher and any other
        writer of its partial lock in one order)."""
        rows = in_lock_order(increments, 3)
        if node is None:
            self.conn.executemany(self.SQL_ADD_WHOLE, rows).close()
        else:
            self.conn.executemany(self.SQL_ADD, [(*row, node) for row in rows]).close()

    def stream_zones(self) -> list[tuple[int, str]]:
        """(stream id, its campaign's timezone)."""
        return self.conn.execute(self.SQL_STREAM_ZONES).fetchall()

    def offer_zones(self) -> list[tuple[int, str]]:
        return self.conn.execute(self.SQL_OFFER_ZONES).fetchall()
