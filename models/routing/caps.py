"""Click counts per stream and per offer, total and per local day: what click caps are checked against.

Two writers keep the same numbers. The spool flusher adds every landed click to `click_counter`
in the same transaction as the click rows and the spool position. A web worker reads the counters
and the position in one snapshot at start, then counts every journal line after that position
(its own and other workers'), all of which it sees under the journal lock before it appends: so
under that lock its counts are exact, whatever the number of workers, and a capped offer stops at
exactly its cap.

A day is a local date (YYYYMMDD) in the timezone of the campaign (stream caps) or of the offer
(offer caps: an offer can serve campaigns in several timezones). Changing a timezone applies to
caps from the next local day.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from models.store.counters import CounterStore

if TYPE_CHECKING:
    import sqlite3

STREAM, OFFER = "stream", "offer"


class LocalDays:
    """Unix ms → local date as YYYYMMDD in one timezone; PERF: caches the current day's bounds."""

    __slots__ = ("tz", "_start", "_end", "_day")

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        self._start = self._end = 0
        self._day = 0

    def day(self, ms: int) -> int:
        if self._start <= ms < self._end:
            return self._day
        local = datetime.fromtimestamp(ms / 1000, self.tz)
        # The bounds are only a cache: where DST skips or repeats midnight, a miss recomputes.
        start = int(datetime.combine(local.date(), time(0), self.tz).timestamp() * 1000)
        end = int(datetime.combine(local.date() + timedelta(days=1), time(0), self.tz).timestamp() * 1000)
        day = local.year * 10000 + local.month * 100 + local.day
        if start <= ms < end:
            self._start, self._end, self._day = start, end, day
        return day


_days_by_zone: dict[str, LocalDays] = {}


def local_days(zone: str) -> LocalDays:
    """The shared LocalDays of a timezone name; an unknown name counts in UTC."""
    days = _days_by_zone.get(zone)
    if days is None:
        try:
            tz = ZoneInfo(zone)
        except (ValueError, KeyError, OSError):
            tz = ZoneInfo("UTC")
        days = _days_by_zone[zone] = LocalDays(tz)
    return days


class ClickCounters:
    """A worker's counts of clicks per (scope, id): total and per local day."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, int], int] = {}
        self.days: dict[tuple[str, int, int], int] = {}

    def load(self, conn: sqlite3.Connection, now_ms: int) -> None:
        """Start from the database's counters (read in the same snapshot as the spool position)."""
        store = CounterStore(conn)
        self.totals = {(scope, ref): clicks for scope, ref, clicks in store.totals()}
        # Local "today" is at most 14 h ahead of or 12 h behind UTC: two UTC days back is plenty.
        since = local_days("UTC").day(now_ms - 2 * 86_400_000)
        self.days = {(scope, ref, day): clicks for scope, ref, day, clicks in store.days_since(since)}

    def add(self, scope: str, ref: int, day: int) -> None:
        key = (scope, ref)
        self.totals[key] = self.totals.get(key, 0) + 1
        day_key = (scope, ref, day)
        self.days[day_key] = self.days.get(day_key, 0) + 1

    def is_capped(self, scope: str, ref: int, daily_cap: int | None, total_cap: int | None, day: int) -> bool:
        if total_cap is not None and self.totals.get((scope, ref), 0) >= total_cap:
            return True
        return daily_cap is not None and self.days.get((scope, ref, day), 0) >= daily_cap


class CounterZones:
    """Which timezone's days each stream and offer counts in, for the flusher and the web workers alike."""

    def __init__(self) -> None:
        self.streams: dict[int, LocalDays] = {}
        self.offers: dict[int, LocalDays] = {}

    def load(self, conn: sqlite3.Connection) -> None:
        store = CounterStore(conn)
        self.streams = {ref: local_days(zone) for ref, zone in store.stream_zones()}
        self.offers = {ref: local_days(zone) for ref, zone in store.offer_zones()}

    def day(self, conn: sqlite3.Connection, scope: str, ref: int, created_at: int) -> int:
        """The local day (YYYYMMDD) a click of `ref` counts on."""
        days = (self.streams if scope is STREAM else self.offers).get(ref)
        if days is None:  # Created since we looked (or a row without one: UTC).
            self.load(conn)
            days = (self.streams if scope is STREAM else self.offers).setdefault(ref, local_days("UTC"))
        return days.day(created_at)

    def increments(self, conn: sqlite3.Connection, clicks: Iterable[tuple[int | None, int | None, int]]):
        """(scope, id, day, clicks) for (stream_id, offer_id, created_at) of landed clicks."""
        counts: dict[tuple[str, int, int], int] = {}
        for stream_id, offer_id, created_at in clicks:
            for scope, ref in ((STREAM, stream_id), (OFFER, offer_id)):
                if ref is not None:
                    key = (scope, ref, self.day(conn, scope, ref, created_at))
                    counts[key] = counts.get(key, 0) + 1
        return [(scope, ref, day, clicks) for (scope, ref, day), clicks in counts.items()]


def cap_usage(conn, scope: str, ref: int, zone: str, now_ms: int) -> tuple[int, int]:
    """(clicks today, clicks in all) a stream's or offer's caps are checked against, today being the
    local day in `zone` (the campaign's for a stream, the offer's own for an offer), as landed so far."""
    return CounterStore(conn).usage(scope, ref, local_days(zone).day(now_ms))


def add_to_counters(
    conn: sqlite3.Connection, increments: Iterable[tuple[str, int, int, int]], node: int | None = 0
) -> None:
    """Add (scope, id, day, clicks) to `click_counter`'s partial `node` (the flushing node's:
    models/clicks/node.py partial_number; None before migration 0036); call inside the flush
    transaction."""
    CounterStore(conn).add(increments, node)
