"""Local dates and times the user types, as UTC millisecond bounds on an indexed column.

A range is `[start, end)` in Unix milliseconds, computed in the user's timezone (DST included), so
queries compare the stored UTC column directly (`created_at >= ? AND created_at < ?`) and use its
index; a function on the column made a reference tracker's 30-day report take 14 s.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

MAX_LOG_ROWS = 100_000
# Clicks are stored in Unix ms: a date before 1970 asks nothing a report can answer, and the day
# after 9999-12-31 (a bare end date's midnight) overflows Python's dates.
MIN_DATE = date(1970, 1, 1)
MAX_DATE = date(9999, 12, 30)  # Its end (the midnight after it) is the last a date can say.


class TimeRangeError(ValueError):
    """A date, time or timezone that cannot be used; the message is one sentence for the user."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        raise TimeRangeError(f"Unknown timezone {name!r}; use an IANA name such as Europe/Berlin.") from None


def local_instant(text: str, tz: ZoneInfo, *, is_end: bool) -> int:
    """Unix ms of a local date or date-time; a bare end date means the midnight after it."""
    try:
        if "T" in text or " " in text:
            local = datetime.fromisoformat(text.replace(" ", "T"))
            day = local.date()
            if local.tzinfo is None:
                local = local.replace(tzinfo=tz)
        else:
            day = date.fromisoformat(text)
            local = None
    except ValueError:
        raise TimeRangeError(
            f"{text!r} is not a date (YYYY-MM-DD) or a date and time (YYYY-MM-DDTHH:MM)."
        ) from None
    if not MIN_DATE <= day <= MAX_DATE:
        raise TimeRangeError(f"{text!r} is out of range: use dates from {MIN_DATE} to {MAX_DATE}.")
    if local is None:
        local = datetime.combine(day + timedelta(days=1) if is_end else day, time(0), tz)
    return int(local.timestamp() * 1000)


def local_iso(ms: int, tz: ZoneInfo) -> str:
    """Unix ms as ISO text in `tz`, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, tz).isoformat(timespec="milliseconds")


def time_bounded(select, column, *, since: str | None, until: str | None, tz: ZoneInfo, limit: int):
    """A Peewee select narrowed to the local range [since, until) on a UTC-ms column, `limit` rows."""
    if not 1 <= limit <= MAX_LOG_ROWS:
        raise TimeRangeError(f"The limit must be between 1 and {MAX_LOG_ROWS:,}.")
    if since:
        select = select.where(column >= local_instant(since, tz, is_end=False))
    if until:
        select = select.where(column < local_instant(until, tz, is_end=True))
    return select.limit(limit)


def localise_times(
    rows: list[dict[str, Any]], columns: tuple[str, ...], tz: ZoneInfo
) -> list[dict[str, Any]]:
    """Rows with their UTC-ms `columns` as ISO text in `tz` (None stays None)."""
    for row in rows:
        for column in columns:
            if row.get(column) is not None:
                row[column] = local_iso(row[column], tz)
    return rows
