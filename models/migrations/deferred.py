"""Deferred migration steps: heavy work (backfills, index builds) done after `lanner db migrate`, in chunks.

A migration registers a step in `deferred_step` with a target (e.g. the last click id it covers);
the Huey consumer runs pending steps in short write transactions (a chunk is a fraction of a
second, and clicks meanwhile wait in the spool, not in a visitor's request), each chunk saving
its position with its work, so a crash or a restart resumes where it stopped and no chunk is
applied twice. `lanner db run-deferred` runs them by hand with a progress bar; `lanner db status`
shows their progress.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from peewee import Database

import models.migrations as migrations_package
from models.migrations.runner import migration_names
from models.store.database import write_tx
from models.store.deferred import DeferredStepStore

ROLLUP_BACKFILL = "rollup_backfill"  # Migration 0004's; reports read the rollups once it is done.
CHUNK_IDS = 20_000  # Click ids per chunk, for every step that walks the click table.
PAUSE_BETWEEN_CHUNKS = 0.05  # Lets the spool flusher take the write lock between chunks.


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
    return [Step(*row) for row in DeferredStepStore(db.connection()).rows()]


def pending_steps(db: Database) -> list[Step]:
    return [step for step in list_steps(db) if step.state != "done"]


@functools.cache
def chunk_runners() -> dict[str, Callable]:
    """Every migration's deferred steps: name -> runner(conn, step, now ms), which returns (new
    position, units done), or None when the step is not due yet. A migration that leaves heavy work
    behind declares its runners as `DEFERRED_STEPS` next to the `apply` that registers them."""
    runners: dict[str, Callable] = {}
    for name in migration_names():
        runners.update(
            getattr(importlib.import_module(f"{migrations_package.__name__}.{name}"), "DEFERRED_STEPS", {})
        )
    return runners


def run_chunk(db: Database, name: str, *, clock=time.time) -> Step:
    """Run one chunk of step `name` and save its position with it; return the step as it now is.

    A step that is not due yet comes back unchanged (state `pending`, or `running`).
    """
    with write_tx(db):
        conn = db.connection()
        steps = DeferredStepStore(conn)
        row = steps.row(name)
        assert row is not None, f"no deferred step {name!r}"
        step = Step(*row)
        now = int(clock() * 1000)
        if step.state != "done" and (outcome := chunk_runners()[name](conn, step, now)) is not None:
            position, added = outcome
            state = "done" if position >= step.target else "running"
            finished = int(clock() * 1000) if state == "done" else None
            steps.save(name, state, position, step.done_units + added, now, finished)
            row = steps.row(name)
            assert row is not None
            step = Step(*row)
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
    ran: list[Step] = []
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
    return DeferredStepStore(conn).state(ROLLUP_BACKFILL) == "done"
