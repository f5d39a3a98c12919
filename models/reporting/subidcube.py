"""Building the columnar history's sub id cube (docs/analytics.md, "The sub id cube"; the statements and
the invariant are models/store/duckdb/subidcube.py's): each closed UTC day's clicks summed by campaign,
country and sub id slot, so reports by zone read pre-summed rows for those days.

Only the history's one writer builds it: the worker's minute task after its append and compaction (for
at most RUN_SECONDS), or `lanner analytics cube` (every closed day now, with a progress bar), both under
the appender's lock. A day is one DuckDB transaction (its old rows, its new ones and its day row): a
kill leaves it built or not, and the next run builds what is left. A day is closed as for compaction:
the history holds clicks CLOSE_MARGIN_MS past its end. A day whose clicks change later (copied again,
repaired) is marked stale by that change and built again here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from models.reporting.compaction import CLOSE_MARGIN_MS, HistoryFiles
from models.store.duckdb.connection import appending, open_history, transaction
from models.store.duckdb.subidcube import DAY_MS, SubidCube

RUN_SECONDS = 10.0  # The worker's share of each minute (after compaction's).

# (days built so far, days to build in all) after each day's commit.
DayCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class CubeResult:
    days: int  # Days built by this run.
    rows: int  # Cube rows they wrote.
    days_left: int  # Closed days still to build.


def closed_before(cube: SubidCube) -> int:
    """The end of the last closed day (Unix ms; 0 if none is): CLOSE_MARGIN_MS before the newest click."""
    last = cube.last_day()
    newest = cube.newest_from(0 if last is None else last)
    if newest is None:
        return 0
    closing = newest - CLOSE_MARGIN_MS
    return max(closing - closing % DAY_MS, 0)


def cube_status(conn: Any) -> dict[str, Any]:
    """For `lanner analytics status`: days built, days stale (to build again), the last day built, the
    cube's rows, and the closed days still to build (stale ones included)."""
    cube = SubidCube(conn)
    if not cube.exists():
        return {
            "cube_days": 0,
            "cube_stale_days": 0,
            "cube_last_day": None,
            "cube_rows": 0,
            "cube_days_left": None,
        }
    built, stale, last, rows = cube.status()
    closed = closed_before(cube)
    return {
        "cube_days": built,
        "cube_stale_days": stale,
        "cube_last_day": None if last is None else time.strftime("%Y-%m-%d", time.gmtime(last / 1000)),
        "cube_rows": rows,
        "cube_days_left": len(cube.days_to_build(closed)) if closed else 0,
    }


def build_cube(
    files: HistoryFiles, *, seconds: float | None = None, on_day: DayCallback | None = None
) -> CubeResult:
    """Build the cube for the closed days not built (or stale), a day a transaction, for at most
    `seconds` (None: all of them); HistoryBusy at once if another process appends (or compacts)."""
    with appending(files.path):
        return build_cube_unlocked(files, seconds=seconds, on_day=on_day)


def build_cube_unlocked(
    files: HistoryFiles,
    *,
    seconds: float | None = None,
    on_day: DayCallback | None = None,
    is_unread: bool = False,
) -> CubeResult:
    """build_cube for a caller that holds the appender's lock already (a rebuild, on its new file,
    which no reader opens yet: `is_unread`)."""
    if not files.path.exists():
        return CubeResult(0, 0, 0)
    deadline = None if seconds is None else time.monotonic() + seconds
    # Read-only first: nothing to build opens nothing for writing (a reader outside the lock protocol,
    # a DuckDB shell, is not refused for nothing).
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        cube = SubidCube(conn)
        closed = closed_before(cube)
        days = cube.days_to_build(closed) if closed else []
    built, rows = 0, 0
    while built < len(days) and (deadline is None or time.monotonic() < deadline):
        # A day an open: a reader waits for one day's build at most (~1 s at 1.7 M clicks a day). A
        # file no reader opens yet has every day in one open: an open and its closing checkpoint cost
        # ~8 ms of CPU, more than a small day's build (a rebuild of 60 such days: 60 opens).
        with open_history(files.path, write=True, memory_limit=files.memory_limit) as conn:
            cube = SubidCube(conn)
            cube.create()  # A file made before the cube (made here, empty, if the day's build is killed).
            while built < len(days):
                with transaction(conn):
                    rows += cube.build_day(days[built])
                built += 1
                if on_day is not None:
                    on_day(built, len(days))
                if not is_unread or (deadline is not None and time.monotonic() >= deadline):
                    break
    return CubeResult(built, rows, len(days) - built)
