"""Deferred migration steps: heavy work (backfills, index builds) done after `lanner db migrate`, in chunks.

A migration registers a step in `deferred_step` with a target (e.g. the last click id it covers);
the Huey consumer runs pending steps in short write transactions (a chunk is a fraction of a
second, and clicks meanwhile wait in the spool, not in a visitor's request), each chunk saving
its position with its work, so a crash or a restart resumes where it stopped and no chunk is
applied twice. `lanner db run-deferred` runs them by hand with a progress bar; `lanner db status`
shows their progress.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from peewee import Database

from models.hotpath import fetch_one
from models.rollups import backfill_clicks, backfill_conversions

ROLLUP_BACKFILL = "rollup_backfill"
CHUNK_IDS = 20_000
PAUSE_BETWEEN_CHUNKS = 0.05  # Lets the spool flusher take the write lock between chunks.

SQL_STEPS = (
    "SELECT name, state, position, target, done_units, total_units, started_at, finished_at, error "
    "FROM deferred_step"
)
SQL_STEP = SQL_STEPS + " WHERE name = ?"
SQL_SAVE = """
UPDATE deferred_step SET state = ?, position = ?, done_units = ?, started_at = COALESCE(started_at, ?),
    finished_at = ? WHERE name = ?
"""
SQL_COUNT_CLICKS = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"
SQL_CONVERSIONS_STATE = "SELECT value FROM meta WHERE key = 'rollup_conversions'"
SQL_CONVERSIONS_LIVE = "UPDATE meta SET value = 'live' WHERE key = 'rollup_conversions'"


@dataclass
class Step:
    name: str
    state: str  # pending, running, done
    position: int
    target: int
    done_units: int
    total_units: int
    started_at: int | None
    finished_at: int | None
    error: str

    @property
    def percent(self) -> float:
        return 100.0 if self.state == "done" else 100.0 * self.done_units / max(self.total_units, 1)


def list_steps(db: Database) -> list[Step]:
    return [Step(*row) for row in db.execute_sql(SQL_STEPS).fetchall()]


def pending_steps(db: Database) -> list[Step]:
    return [step for step in list_steps(db) if step.state != "done"]


def _rollup_chunk(conn, step: Step) -> tuple[int, int]:
    """One chunk of the rollup backfill: (new position, clicks added)."""
    if fetch_one(conn, SQL_CONVERSIONS_STATE)[0] != "live":
        # Stored conversions join the rollups in the same transaction that makes later changes
        # update them, so none is counted twice or missed.
        backfill_conversions(conn)
        conn.execute(SQL_CONVERSIONS_LIVE)
    end = min(step.position + CHUNK_IDS, step.target)
    backfill_clicks(conn, step.position, end)
    return end, fetch_one(conn, SQL_COUNT_CLICKS, (step.position, end))[0]


CHUNK_RUNNERS: dict[str, Callable] = {ROLLUP_BACKFILL: _rollup_chunk}


def run_chunk(db: Database, name: str, *, clock=time.time) -> Step:
    """Run one chunk of step `name` and save its position with it; return the step as it now is."""
    with db.atomic("IMMEDIATE"):
        conn = db.connection()
        step = Step(*fetch_one(conn, SQL_STEP, (name,)))
        if step.state != "done":
            position, added = CHUNK_RUNNERS[name](conn, step)
            now = int(clock() * 1000)
            state = "done" if position >= step.target else "running"
            conn.execute(
                SQL_SAVE,
                (state, position, step.done_units + added, now, now if state == "done" else None, name),
            )
            step = Step(*fetch_one(conn, SQL_STEP, (name,)))
    return step


def run_deferred(
    db: Database,
    *,
    on_progress: Callable[[Step], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    pause: float = PAUSE_BETWEEN_CHUNKS,
) -> list[Step]:
    """Run every pending step to the end (or until `should_stop`); return the steps run."""
    ran = []
    for step in pending_steps(db):
        while step.state != "done" and not should_stop():
            step = run_chunk(db, step.name)
            if on_progress:
                on_progress(step)
            if step.state != "done":
                time.sleep(pause)
        ran.append(step)
    return ran


def rollups_ready(conn) -> bool:
    """Whether the rollups hold every stored click and conversion (reports may read them)."""
    row = fetch_one(conn, "SELECT state FROM deferred_step WHERE name = ?", (ROLLUP_BACKFILL,))
    return row is not None and row[0] == "done"
