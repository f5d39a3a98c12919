"""Compaction of the columnar history's closed days (docs/analytics.md, "Compaction"; the statements are
models/store/duckdb/compaction.py's): each closed UTC day's clicks rewritten campaign by campaign in
time order, so a report filtered to a campaign reads its run of row groups, not every one of the period.

Only the history's one writer compacts: the worker's minute task after its append (for at most
RUN_SECONDS, so the append of the next minute is not held up), or `lanner analytics compact` (all the
closed days now, with a progress bar), both under the appender's lock. The file is opened read-write
for about SESSION_SECONDS of slices at a time, so a report waits about that long for its shared lock
(models/store/duckdb/connection.py) and then reads the history whole: before or after a slice moved,
never in between.

A day is closed once the history holds clicks CLOSE_MARGIN_MS past its end: the appender has copied
its clicks but for stragglers (a click flushed late from the spool, one copied again after a change),
which land after the compacted run, exact but outside it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from models.store.duckdb.compaction import DAY_MS, Compaction, Cursor
from models.store.duckdb.connection import LOCK_POLL, appending, open_history


class HistoryFiles(Protocol):
    """What compaction needs of models/reporting/history.py's HistoryFiles (which imports this module
    for `lanner analytics status`: named here, not imported back)."""

    @property
    def path(self) -> Path: ...

    @property
    def memory_limit(self) -> str: ...


CLOSE_MARGIN_MS = 3_600_000
# Clicks a transaction moves at most (a campaign's day more, in time slices): just over a row group, so
# DuckDB writes them straight to the file's blocks, not through the WAL; ~1-1.5 s at 100 M clicks.
SLICE = 125_000
RUN_SECONDS = 20.0  # The worker's share of each minute.
SESSION_SECONDS = 1.0  # Slices moved in one read-write open: about a reader's longest wait.

# (days done so far, days closed in all) after each slice's commit.
StepCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class CompactionResult:
    moved: int  # Clicks rewritten.
    days: int  # Days finished by this run.
    days_left: int  # Closed days still to compact.
    compacted_before: int  # Unix ms: every day with clicks before it is compacted (0: none yet).


def closed_before(compaction: Compaction, cursor: Cursor) -> int:
    """The end of the last closed day (Unix ms; 0 if none is): CLOSE_MARGIN_MS before the newest click."""
    newest = compaction.newest_from(cursor.day)
    if newest is None:
        return 0
    closing = newest - CLOSE_MARGIN_MS
    return closing - closing % DAY_MS


def compaction_status(conn: Any) -> dict[str, Any]:
    """Where the compaction stands, for `lanner analytics status`: the UTC day every day before which is
    compacted (None: none is yet), and the closed days still to compact."""
    compaction = Compaction(conn)
    cursor = compaction.cursor()
    closed = closed_before(compaction, cursor)
    return {
        "compacted_before": _day(cursor.day) if cursor.day else None,
        "compaction_days_left": compaction.days_left(cursor, closed) if closed else 0,
    }


def compact_history(
    files: HistoryFiles,
    *,
    seconds: float | None = None,
    limit: int = SLICE,
    session: float = SESSION_SECONDS,
    on_step: StepCallback | None = None,
) -> CompactionResult:
    """Compact the closed days, a slice a transaction and `session` seconds of slices an open, for at
    most `seconds` (None: until all are); HistoryBusy at once if another process appends (or compacts).
    `on_step` is called between opens, when readers may read."""
    with appending(files.path):
        return _compact(files, seconds, limit, session, on_step)


def _compact(
    files: HistoryFiles, seconds: float | None, limit: int, session: float, on_step: StepCallback | None
) -> CompactionResult:
    if not files.path.exists():
        return CompactionResult(0, 0, 0, 0)
    deadline = None if seconds is None else time.monotonic() + seconds
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        compaction = Compaction(conn)
        cursor = compaction.cursor()
        closed = closed_before(compaction, cursor)
        total = compaction.days_left(cursor, closed) if closed else 0
    moved, days = 0, 0
    is_done = not total
    while not is_done and (deadline is None or time.monotonic() < deadline):
        # PERF: an open holds `session` seconds of slices: each close checkpoints (and vacuums the row
        # groups the slices emptied); readers wait for the close.
        session_end = time.monotonic() + session
        with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
            compaction = Compaction(conn)
            while True:
                began = time.monotonic()
                step = compaction.step(closed, limit)
                if step is None:
                    is_done = True
                    break
                moved += step.moved
                if step.cursor.day != cursor.day and cursor.day:
                    days += 1
                cursor = step.cursor
                # No slice begun that would likely end past the session (as long as the last one took).
                if 2 * time.monotonic() - began >= session_end:
                    break
        if on_step is not None:
            on_step(min(days, total), total)
        if not is_done:
            # A reader polls for its shared lock (every LOCK_POLL): let one in before the next open.
            time.sleep(3 * LOCK_POLL)
    return CompactionResult(moved, days, max(total - days, 0), cursor.day)


def _day(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))
