"""Compaction of the columnar history's sealed days (docs/analytics.md, "Compaction"): the statements that
rewrite a closed UTC day's clicks campaign by campaign in time order, so each campaign's clicks of the
day are one contiguous run of row groups and DuckDB's zone maps on campaign_id skip the rest.

The appender writes chunks of 50,000 clicks sorted by (campaign, time), but DuckDB's row groups hold
122,880 rows: every row group spans every campaign and a campaign filter skips nothing. A step of the
compaction moves one slice — one campaign's clicks of the day from a moment on, at most `limit` of
them — to the end of the table in one transaction (copied in time order into a temporary table,
deleted, inserted back from it) together with the cursor it reaches in `history_meta`:

- `compacted_before`: Unix ms, a UTC day's start: every day before it is compacted, this one is the
  day in progress (absent: 0, nothing compacted; the first step starts at the first click's day);
- `compacting_campaign`: the lowest campaign id of that day still to move;
- `compacting_from`: where in that campaign's day the next slice starts (a campaign moved in slices).

So a kill at any instant loses nothing and duplicates nothing (the transaction is whole or absent) and
the next run goes on with the next slice; moving a slice twice would only sort it twice. Row groups
left wholly deleted are dropped, and thinned ones merged, at DuckDB's checkpoint.

A click written into a compacted day later (copied again after a mutation, a repair, one landed late)
goes to the table's end as any append does: exact, only not in its campaign's run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from models.store.duckdb.connection import transaction
from models.tables.dimensions import DAY_MS

_META_KEYS = ("compacted_before", "compacting_campaign", "compacting_from")


@dataclass(frozen=True)
class Cursor:
    """Where the compaction stands: `day` (Unix ms of a UTC day's start; 0 before any step) is in
    progress, every day before it is done; its campaigns below `campaign` are moved, and of `campaign`
    the clicks before `moment`."""

    day: int
    campaign: int
    moment: int


@dataclass(frozen=True)
class Step:
    """What one step did: the clicks it moved (0 when it only went on to the next day) and the cursor
    it left."""

    moved: int
    cursor: Cursor


class Compaction:
    """The compaction's statements over the history's DuckDB connection (opened read-write by the one
    history writer, under the appender's lock)."""

    SQL_CURSOR = f"SELECT key, value FROM history_meta WHERE key IN {_META_KEYS}"
    SQL_SET = (
        "INSERT INTO history_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
    # The first click at or after a moment: the day to compact next (days without clicks are skipped).
    SQL_FIRST_FROM = "SELECT MIN(created_at) FROM click WHERE created_at >= ?"
    # The newest click from a moment on (zone maps skip the compacted days' row groups).
    SQL_NEWEST_FROM = "SELECT MAX(created_at) FROM click WHERE created_at >= ?"
    # The day's clicks still to move, per campaign (those of the campaign in progress from its moment).
    SQL_CAMPAIGN_COUNTS = (
        "SELECT campaign_id, COUNT(*) FROM click WHERE created_at >= ? AND created_at < ? "
        "AND campaign_id >= ? AND (campaign_id > ? OR created_at >= ?) "
        "GROUP BY campaign_id ORDER BY campaign_id"
    )
    # Where a slice of `limit` clicks of one campaign ends: the time of the first click past it.
    SQL_SLICE_END = (
        "SELECT created_at FROM click WHERE campaign_id = ? AND created_at >= ? AND created_at < ? "
        "ORDER BY created_at LIMIT 1 OFFSET ?"
    )
    # The slice: campaigns lo..hi of [start, end), lo's from its moment on.
    _SLICE = (
        "campaign_id BETWEEN ? AND ? AND created_at >= ? AND created_at < ? "
        "AND (campaign_id > ? OR created_at >= ?)"
    )
    # Every row there now has a rowid at most this; the rows a transaction inserts get higher ones.
    SQL_LAST_ROWID = "SELECT MAX(rowid) FROM click WHERE created_at >= ? AND created_at < ?"
    # PERF: one INSERT ... SELECT ... ORDER BY of many row groups is written straight to the file's
    # blocks (DuckDB's optimistic write) and keeps its order; small transactions went through the WAL
    # and a checkpoint each: ~7x the CPU and ~15x the time, measured.
    SQL_COPY_SLICE = (
        f"INSERT INTO click SELECT * FROM click WHERE {_SLICE} ORDER BY campaign_id, created_at, id"
    )
    SQL_DELETE_SLICE = f"DELETE FROM click WHERE {_SLICE} AND rowid <= ?"
    SQL_DAYS_LEFT = (
        f"SELECT COUNT(DISTINCT created_at // {DAY_MS}) FROM click WHERE created_at >= ? AND created_at < ?"
    )
    __slots__ = ("conn",)

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def cursor(self) -> Cursor:
        values = dict(self.conn.execute(self.SQL_CURSOR).fetchall())
        return Cursor(
            values.get("compacted_before", 0),
            values.get("compacting_campaign", 0),
            values.get("compacting_from", 0),
        )

    def newest_from(self, moment: int) -> int | None:
        """The newest click's time from `moment` on (None: none)."""
        return self.conn.execute(self.SQL_NEWEST_FROM, (moment,)).fetchone()[0]

    def days_left(self, cursor: Cursor, closed_before: int) -> int:
        """The UTC days with clicks from the day in progress up to `closed_before` (not compacted yet)."""
        return self.conn.execute(self.SQL_DAYS_LEFT, (cursor.day, closed_before)).fetchone()[0]

    def step(self, closed_before: int, limit: int) -> Step | None:
        """Move the next slice (at most `limit` clicks) of the days ending by `closed_before`, or go on to
        the next day with clicks; None when every such day is compacted."""
        cursor = self.cursor()
        day = cursor.day
        if day == 0:  # Nothing compacted yet: begin at the first click's day.
            first = self.conn.execute(self.SQL_FIRST_FROM, (0,)).fetchone()[0]
            if first is None:
                return None
            day = first - first % DAY_MS
            cursor = Cursor(day, 0, day)
        if day + DAY_MS > closed_before:
            return None
        end_of_day = day + DAY_MS
        counts = self.conn.execute(
            self.SQL_CAMPAIGN_COUNTS, (day, end_of_day, cursor.campaign, cursor.campaign, cursor.moment)
        ).fetchall()
        if not counts:  # The day is done: on to the next with clicks (the cursor alone moves).
            first = self.conn.execute(self.SQL_FIRST_FROM, (end_of_day,)).fetchone()[0]
            following = end_of_day if first is None else max(first - first % DAY_MS, end_of_day)
            after = Cursor(following, 0, following)
            with self._transaction():
                self._set(after)
            return Step(0, after)
        low = counts[0][0]
        moment = max(cursor.moment, day) if low == cursor.campaign else day
        high, end, taken = low, end_of_day, 0
        if counts[0][1] > limit:  # A campaign's day bigger than a slice: moved in time slices, in order.
            past = self.conn.execute(self.SQL_SLICE_END, (low, moment, end_of_day, limit)).fetchone()
            if past is not None:
                end = past[0] if past[0] > moment else moment + 1  # `limit` clicks in one ms: that ms.
            after = Cursor(day, low + 1, day) if end == end_of_day else Cursor(day, low, end)
        else:  # Whole campaigns, as many as fit.
            for campaign, count in counts:
                if taken and taken + count > limit:
                    break
                high, taken = campaign, taken + count
            after = Cursor(day, high + 1, day)
        where = (low, high, day, end, low, moment)
        with self._transaction():
            last = self.conn.execute(self.SQL_LAST_ROWID, (day, end_of_day)).fetchone()[0]
            self.conn.execute(self.SQL_COPY_SLICE, where)
            moved = self.conn.execute(self.SQL_DELETE_SLICE, (*where, last)).fetchone()[0]
            self._set(after)
        return Step(moved, after)

    SQL_ZONE_MAPS = (
        "SELECT row_group_id, stats FROM pragma_storage_info('click') "
        "WHERE column_name = ? AND segment_type <> 'VALIDITY' ORDER BY row_group_id"
    )

    def row_group_spans(self, column: str) -> list[tuple[int, int, int]]:
        """(row group, lowest value, highest) of an integer column in each row group of the click table:
        the zone maps DuckDB skips row groups by."""
        rows = self.conn.execute(self.SQL_ZONE_MAPS, (column,)).fetchall()
        spans: dict[int, tuple[int, int]] = {}
        for group, stats in rows:
            low, high = _min_max(stats)
            if low is None or high is None:
                continue
            seen = spans.get(group)
            spans[group] = (low, high) if seen is None else (min(seen[0], low), max(seen[1], high))
        return [(group, low, high) for group, (low, high) in sorted(spans.items())]

    def _set(self, cursor: Cursor) -> None:
        for key, value in zip(_META_KEYS, (cursor.day, cursor.campaign, cursor.moment), strict=True):
            self.conn.execute(self.SQL_SET, (key, value))

    def _transaction(self) -> contextlib.AbstractContextManager[None]:
        return transaction(self.conn)


def _min_max(stats: Any) -> tuple[int | None, int | None]:
    """A segment's zone map from pragma_storage_info (a dict, or a text in older DuckDB versions)."""
    if isinstance(stats, dict):
        low, high = stats.get("min"), stats.get("max")
        return (None if low is None else int(low), None if high is None else int(high))
    import re

    found = re.search(r"[Mm]in:\s*(-?\d+).*?[Mm]ax:\s*(-?\d+)", str(stats))
    return (int(found[1]), int(found[2])) if found else (None, None)
