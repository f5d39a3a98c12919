"""Local dates and times the user types, as UTC millisecond bounds on an indexed column.

A range is `[start, end)` in Unix milliseconds, computed in the user's timezone (DST included), so
queries compare the stored UTC column directly (`created_at >= ? AND created_at < ?`) and use its
index; a function on the column made a reference tracker's 30-day report take 14 s.

Local times that are not one instant follow one rule (`local_ms`), for reports, `cost set` and the
logs alike: a time the clocks skip (02:30 on a spring-forward night in Berlin) is the instant the
clocks jump (03:00 CEST), so a range bound there includes exactly the instants whose local time
is before or after it; a time that happens twice (02:30 on a fall-back night) is its first
occurrence, the summer one; a time written with an offset (`2026-10-25T02:30+01:00`) is that
instant, which picks the second.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from peewee import Tuple

from models.errors import LannerError

MAX_LOG_ROWS = 100_000
# Clicks are stored in Unix ms: a date before 1970 asks nothing a report can answer, and the day
# after 9999-12-31 (a bare end date's midnight) overflows Python's dates.
MIN_DATE = date(1970, 1, 1)
MAX_DATE = date(9999, 12, 30)  # Its end (the midnight after it) is the last a date can say.


class TimeRangeError(LannerError, ValueError):
    """A date, time or timezone that cannot be used; the message is one sentence for the user."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        raise TimeRangeError(f"Unknown timezone {name!r}; use an IANA name such as Europe/Berlin.") from None


def local_ms(wall: datetime, tz: ZoneInfo) -> int:
    """Unix ms of a wall-clock time in `tz` (naive), by the module's rule for skipped and repeated times."""
    first = wall.replace(tzinfo=tz, fold=0)  # fold=0: a repeated time's first occurrence.
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):
        return int(first.timestamp() * 1000)
    # Skipped: the jump lies between the time read with the offset after it (fold=1, earlier in
    # UTC) and with the offset before it (fold=0); find the first second on the new offset.
    low = int(wall.replace(tzinfo=tz, fold=1).timestamp())
    high = int(first.timestamp())
    after = datetime.fromtimestamp(high, tz).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == after:
            high = middle
        else:
            low = middle
    return high * 1000


def local_instant(text: str, tz: ZoneInfo, *, is_end: bool) -> int:
    """Unix ms of a local date or date-time (see local_ms); a bare end date means the midnight after it."""
    try:
        if "T" in text or " " in text:
            local = datetime.fromisoformat(text.replace(" ", "T"))
            day = local.date()
        else:
            day = date.fromisoformat(text)
            local = None
    except ValueError:
        raise TimeRangeError(
            f"{text!r} is not a date (YYYY-MM-DD) or a date and time (YYYY-MM-DDTHH:MM)."
        ) from None
    if not MIN_DATE <= day <= MAX_DATE:
        raise TimeRangeError(f"{text!r} is out of range: use dates from {MIN_DATE} to {MAX_DATE}.")
    if local is None:  # Only now: the midnight after 9999-12-31 is past what a date can say.
        local = datetime.combine(day + timedelta(days=1) if is_end else day, time(0))
    if local.tzinfo is not None:
        return int(local.timestamp() * 1000)
    return local_ms(local, tz)


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


def before(model, time_column, row_id: int):
    """A condition: rows after row `row_id` in a log ordered by (time, id) newest first; none if it is gone.

    The cursor is the id alone; the time is read back from its row, on the primary key."""
    last = model.alias()
    key = last.select(getattr(last, time_column.name), last.id).where(last.id == row_id)
    return Tuple(time_column, model.id) < key


def localise_times(
    rows: list[dict[str, Any]], columns: tuple[str, ...], tz: ZoneInfo
) -> list[dict[str, Any]]:
    """Rows with their UTC-ms `columns` as ISO text in `tz` (None stays None)."""
    for row in rows:
        for column in columns:
            if row.get(column) is not None:
                row[column] = local_iso(row[column], tz)
    return rows
