"""A bounded row store (LANNER_RAW_RETENTION, docs/analytics.md "A bounded row store"): the worker deletes
raw clicks older than the retention once the columnar history holds them, in short batches.

A click goes only when all of these hold, checked in this order:
- the retention is on, and at least the largest uniqueness window plus a day (uniqueness and debounce
  read recent raw clicks: a shorter setting is raised to that, and status says so);
- the rollup backfill is done (models/migrations/deferred.py);
- the history is not behind: no click older than the cutoff is past history_state.position (else
  nothing goes, and status says why);
- its id is at or below the position and it is not queued in history_change (the row store's
  statement checks both again as it deletes: models/store/retention.py);
- the DuckDB file itself holds it, subid included: each batch is counted in DuckDB before it is deleted,
  so a history file lost, replaced or made before the subid was copied stops the deletion.

The run holds the history's append lock (no append, rebuild or repair meanwhile: what DuckDB holds
cannot change under it) and reads DuckDB under the shared lock; each batch is one short write
transaction of the row store (the spool flusher gets the lock between batches), so a kill at any
instant leaves every click in the row store or in the history. `pruned_before` (models/store/meta.py) is
moved to the cutoff before the first batch goes, as `lanner prune` does: `verify` counts the hours
before it apart, and the raw report path refuses them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from peewee import Database

from models.migrations.deferred import rollups_ready
from models.reporting.history import HistoryFiles
from models.store.database import read_tx, write_tx
from models.store.duckdb.connection import HistoryMissing, HistoryUnreadable, appending, open_history
from models.store.duckdb.history import ColumnarHistory
from models.store.history import HistoryStore
from models.store.meta import MetaStore
from models.store.retention import RetentionStore

BATCH = 1_000  # Clicks a write transaction deletes (~0.1 s on SQLite): the flusher's longest wait.
PAUSE = 0.05  # Seconds between batches: the flusher's turn.
RUN_SECONDS = 20.0  # A run stops after this long (the next minute's goes on): appends wait for it.
DAY_MS = 86_400_000
HOUR_MS = 3_600_000

OFF, OK, WAITING, BEHIND, MISSING, UNREADABLE, INCOMPLETE = (
    "off",
    "ok",
    "waiting",
    "behind",
    "missing",
    "unreadable",
    "incomplete",
)


@dataclass(frozen=True)
class RetentionPlan:
    state: str  # OFF, OK, WAITING (rollups), BEHIND (the history), MISSING/UNREADABLE (its file)...
    reason: str  # One sentence: what is deleted, or why nothing is.
    retention_ms: int  # What is used: the setting, or the uniqueness floor above it; 0 when off.
    cutoff: int | None  # Clicks created before it go.


@dataclass(frozen=True)
class RetentionRun:
    deleted: int
    plan: RetentionPlan


def days(ms: int) -> str:
    return f"{ms / DAY_MS:g} days" if ms % DAY_MS == 0 else f"{ms / HOUR_MS:g} hours"


def plan_retention(
    db: Database,
    retention_ms: int,
    *,
    global_uniqueness_hours: float,
    keeps_history: bool = True,
    now_ms: int | None = None,
) -> RetentionPlan:
    """What a run would delete now (its cutoff), or why it would delete nothing."""
    if retention_ms <= 0:
        return RetentionPlan(
            OFF, "LANNER_RAW_RETENTION is off: raw clicks stay until `lanner prune`.", 0, None
        )
    if not keeps_history:
        return RetentionPlan(
            OFF,
            "This node keeps no history (LANNER_HISTORY_NODE): its worker deletes no raw clicks.",
            0,
            None,
        )
    conn = db.connection()
    store = RetentionStore(conn)
    with read_tx(db):
        windows = [hours for _, hours in store.campaign_windows()]
        is_ready = rollups_ready(conn)
        position, _ = HistoryStore(conn).state()
        unheld = store.oldest_unheld(position)
    floor = int(max([global_uniqueness_hours, *windows]) * HOUR_MS) + DAY_MS
    used = max(retention_ms, floor)
    raised = (
        f" (LANNER_RAW_RETENTION is {days(retention_ms)}: raised to the largest uniqueness window plus a day)"
        if used > retention_ms
        else ""
    )
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - used
    if not is_ready:
        return RetentionPlan(
            WAITING,
            "The rollup backfill has not finished (`lanner db status`): no raw click is deleted until then.",
            used,
            cutoff,
        )
    if unheld is not None and unheld < cutoff:
        return RetentionPlan(
            BEHIND,
            f"The history is behind: clicks older than {days(used)} are not in it yet (it holds up to click "
            f"{position}); nothing is deleted until the worker has copied them.",
            used,
            cutoff,
        )
    return RetentionPlan(
        OK, f"Raw clicks older than {days(used)}{raised} leave once the history holds them.", used, cutoff
    )


def prune_held_clicks(
    db: Database,
    files: HistoryFiles,
    retention_ms: int,
    *,
    global_uniqueness_hours: float,
    now_ms: int | None = None,
    batch: int = BATCH,
    pause: float = PAUSE,
    run_seconds: float = RUN_SECONDS,
    on_batch: Callable[[int], None] | None = None,
) -> RetentionRun:
    """Delete the raw clicks older than the retention that the history holds, for at most `run_seconds`;
    HistoryBusy if another process appends (or rebuilds) now."""
    with appending(files.path):
        plan = plan_retention(
            db, retention_ms, global_uniqueness_hours=global_uniqueness_hours, now_ms=now_ms
        )
        if plan.state != OK or plan.cutoff is None:
            return RetentionRun(0, plan)
        try:
            with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
                history = ColumnarHistory(conn, files.path.parent)
                return _delete(db, history, plan, plan.cutoff, batch, pause, run_seconds, on_batch)
        except HistoryMissing as error:
            return RetentionRun(
                0, RetentionPlan(MISSING, f"{error} Nothing is deleted.", plan.retention_ms, None)
            )
        except HistoryUnreadable as error:
            return RetentionRun(
                0, RetentionPlan(UNREADABLE, f"{error} Nothing is deleted.", plan.retention_ms, None)
            )


def _delete(
    db: Database,
    history: ColumnarHistory,
    plan: RetentionPlan,
    cutoff: int,
    batch: int,
    pause: float,
    run_seconds: float,
    on_batch: Callable[[int], None] | None,
) -> RetentionRun:
    conn = db.connection()
    store = RetentionStore(conn)
    deadline = time.monotonic() + run_seconds
    deleted, is_recorded = 0, False
    with read_tx(db):
        campaigns = [campaign_id for campaign_id, _ in store.campaign_windows()]
    for campaign_id in campaigns:
        while True:
            with read_tx(db):
                ids = store.held_before(campaign_id, cutoff, batch)
            if not ids:
                break
            if history.count_held(ids) != len(ids):
                reason = (
                    f"The history file does not hold every click it should (clicks {min(ids)} to {max(ids)}, "
                    "or their subid: a file made before subids were copied): nothing more is deleted; "
                    "`lanner analytics verify`, then `lanner analytics rebuild`."
                )
                return RetentionRun(deleted, RetentionPlan(INCOMPLETE, reason, plan.retention_ms, cutoff))
            if not is_recorded:
                with write_tx(db):  # Before the first batch goes: a run killed after it is recorded too.
                    MetaStore(conn).move_pruned_before(cutoff)
                is_recorded = True
            with write_tx(db):
                deleted += store.delete_held(ids)
            if on_batch is not None:
                on_batch(deleted)
            if time.monotonic() >= deadline:
                return RetentionRun(deleted, plan)
            if len(ids) < batch:
                break
            time.sleep(pause)
    return RetentionRun(deleted, plan)


@dataclass(frozen=True)
class RetentionStatus:
    plan: RetentionPlan
    oldest_raw_click: int | None  # Unix ms.
    history_only: int | None  # Clicks the history holds that the row store no longer has.


def retention_status(
    db: Database,
    retention_ms: int,
    *,
    global_uniqueness_hours: float,
    keeps_history: bool,
    history_clicks_up_to: Callable[[int], int | None],
    now_ms: int | None = None,
) -> RetentionStatus:
    """The plan, the oldest raw click, and how many clicks only the history holds: its clicks up to the
    trusted position less the row store's (`history_clicks_up_to(position)`: DuckDB's count, None
    without a readable file). PERF: a count of the row store's clicks, about a second per 10 M."""
    plan = plan_retention(
        db,
        retention_ms,
        global_uniqueness_hours=global_uniqueness_hours,
        keeps_history=keeps_history,
        now_ms=now_ms,
    )
    conn = db.connection()
    store = RetentionStore(conn)
    with read_tx(db):
        oldest = store.oldest_click([campaign_id for campaign_id, _ in store.campaign_windows()])
        position, _ = HistoryStore(conn).state()
        in_rows = store.count_up_to(position)
    in_history = history_clicks_up_to(position)
    return RetentionStatus(plan, oldest, None if in_history is None else max(0, in_history - in_rows))
