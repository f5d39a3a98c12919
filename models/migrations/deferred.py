"""Deferred migration steps: heavy work (backfills, index builds) done after `lanner db migrate`, in chunks.

A migration registers a step in `deferred_step` with a target (e.g. the last click id it covers);
the Huey consumer runs pending steps in short write transactions (a chunk is a fraction of a
second, and clicks meanwhile wait in the spool, not in a visitor's request), each chunk saving
its position with its work, so a crash or a restart resumes where it stopped and no chunk is
applied twice. `lanner db run-deferred` runs them by hand with a progress bar; `lanner db status`
shows their progress.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Callable

from peewee import Database

from models.reporting.rollups import backfill_conversions
from models.store.database import write_tx
from models.store.sqlite.database import large_cache
from models.store.sqlite.meta import MetaStore
from models.store.sqlite.rollups import RollupStore
from models.store.sqlite.rows import fetch_one

ROLLUP_BACKFILL = "rollup_backfill"
VISITOR_KEY_BACKFILL, VISITOR_KEY_INDEX, CLICK_VISITOR_DROP = (
    "visitor_key_backfill",
    "visitor_key_index",
    "click_visitor_drop",
)
CHUNK_IDS = 20_000
PAUSE_BETWEEN_CHUNKS = 0.05  # Lets the spool flusher take the write lock between chunks.
# Web workers re-read the probe mode within a second of the switch; a worker of the previous
# release is replaced by the reload that follows `lanner db migrate`. Ten minutes covers both.
DROP_GRACE_MS = 600_000
INDEX_BUILD_CACHE_MB = 64  # Freed when the build ends.

_SELECT_STEPS = (
    "SELECT name, state, position, target, done_units, total_units, started_at, finished_at, error "
    "FROM deferred_step"
)
SQL_STEPS = _SELECT_STEPS + " ORDER BY rowid"  # In the order the migrations registered them.
SQL_STEP = _SELECT_STEPS + " WHERE name = ?"
SQL_SAVE = """
UPDATE deferred_step SET state = ?, position = ?, done_units = ?, started_at = COALESCE(started_at, ?),
    finished_at = ? WHERE name = ?
"""
SQL_COUNT_CLICKS = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"
SQL_FILL_VISITOR_KEYS = (
    "UPDATE click SET visitor_key = lanner_visitor_key(ip, ua_hash) "
    "WHERE id > ? AND id <= ? AND visitor_key IS NULL"
)


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
    meta = MetaStore(conn)
    if meta.get("rollup_conversions") != "live":
        # Stored conversions join the rollups in the same transaction that makes later changes
        # update them, so none is counted twice or missed.
        backfill_conversions(conn)
        meta.set("rollup_conversions", "live")
    end = min(step.position + CHUNK_IDS, step.target)
    RollupStore(conn).backfill_clicks(step.position, end)
    return end, fetch_one(conn, SQL_COUNT_CLICKS, (step.position, end))[0]


def _visitor_key_chunk(conn, step: Step, now: int) -> tuple[int, int]:
    """One chunk of the visitor key backfill (migration 0005)."""
    end = min(step.position + CHUNK_IDS, step.target)
    conn.execute(SQL_FILL_VISITOR_KEYS, (step.position, end)).close()
    return end, end - step.position  # Units are ids, as the migration counted them.


def _visitor_key_index(conn, step: Step, now: int) -> tuple[int, int]:
    """Build the covering index and switch the web workers' probes to it, in one transaction.

    The write lock is held for the build (seconds on millions of clicks): clicks wait in the
    spool meanwhile and visitors are not kept waiting, since web workers only read.
    """
    # The migration owns the index's shape.
    migration = importlib.import_module("models.migrations.0005_visitor_key")
    # Clicks a flusher of the previous release landed after the migration have no key yet.
    conn.execute(SQL_FILL_VISITOR_KEYS, (step.target, 2**63 - 1)).close()
    with large_cache(conn, INDEX_BUILD_CACHE_MB):  # SQLite sorts the new keys in the page cache.
        conn.execute(migration.NEW_INDEX).close()
    meta = MetaStore(conn)
    meta.set("visitor_probe", "key")
    meta.put("visitor_probe_switched_at", str(now))
    meta.bump_config_version()
    return step.target, 1


def _drop_old_visitor_index(conn, step: Step, now: int) -> tuple[int, int] | None:
    """Drop (ip, ua_hash, created_at) once every web worker probes the new index; None: not yet."""
    switched = MetaStore(conn).get("visitor_probe_switched_at")
    if switched is None or now < int(switched) + DROP_GRACE_MS:
        return None
    conn.execute("DROP INDEX IF EXISTS click_visitor").close()
    return step.target, 1


def _timeless(runner: Callable) -> Callable:
    return lambda conn, step, now: runner(conn, step)


# Each returns (new position, units done), or None when the step is not due yet.
CHUNK_RUNNERS: dict[str, Callable] = {
    ROLLUP_BACKFILL: _timeless(_rollup_chunk),
    VISITOR_KEY_BACKFILL: _visitor_key_chunk,
    VISITOR_KEY_INDEX: _visitor_key_index,
    CLICK_VISITOR_DROP: _drop_old_visitor_index,
}


def run_chunk(db: Database, name: str, *, clock=time.time) -> Step:
    """Run one chunk of step `name` and save its position with it; return the step as it now is.

    A step that is not due yet comes back unchanged (state `pending`, or `running`).
    """
    with write_tx(db):
        conn = db.connection()
        step = Step(*fetch_one(conn, SQL_STEP, (name,)))
        now = int(clock() * 1000)
        if step.state != "done" and (outcome := CHUNK_RUNNERS[name](conn, step, now)) is not None:
            position, added = outcome
            state = "done" if position >= step.target else "running"
            finished = int(clock() * 1000) if state == "done" else None
            conn.execute(SQL_SAVE, (state, position, step.done_units + added, now, finished, name))
            step = Step(*fetch_one(conn, SQL_STEP, (name,)))
    return step


def run_deferred(
    db: Database,
    *,
    on_progress: Callable[[Step], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    pause: float = PAUSE_BETWEEN_CHUNKS,
) -> list[Step]:
    """Run pending steps in order until one is not due yet (or `should_stop`); return the steps run.

    Steps run one after the other: a later one may rely on an earlier one being done.
    """
    ran = []
    for step in pending_steps(db):
        while step.state != "done" and not should_stop():
            before = step
            step = run_chunk(db, step.name)
            if step == before:  # Not due yet: it and every later step wait for the next run.
                return ran
            if on_progress:
                on_progress(step)
            if step.state != "done":
                time.sleep(pause)
        ran.append(step)
        if step.state != "done":
            break
    return ran


def rollups_ready(conn) -> bool:
    """Whether the rollups hold every stored click and conversion (reports may read them)."""
    row = fetch_one(conn, "SELECT state FROM deferred_step WHERE name = ?", (ROLLUP_BACKFILL,))
    return row is not None and row[0] == "done"
