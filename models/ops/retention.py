"""Retention: delete raw clicks older than a cutoff, in short chunks, keeping every report total.

Reports over whole hours and days read the rollups (models/reporting/rollups.py), which pruning leaves as
they are, so a campaign's totals for a pruned month do not change; what goes is the click log for
that time and the reports only raw rows can answer (sub_id_N and referrer groupings, sub-hour
range edges, days and hours in half-hour timezones): the cutoff is kept in `meta`
(`pruned_before`), and those reports refuse that time with the reason. Cap counters live in
their own table and are untouched. Pruning refuses to run before the rollup backfill has
finished (the clicks would be lost to reports), and keeps at least the largest uniqueness window
plus a day, so uniqueness and debounce never miss a visitor.

The postback log and the refused-postback counters are kept `LANNER_POSTBACK_LOG_DAYS` (the
worker prunes them hourly); a parked postback stays until it is matched or expires.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from peewee import Database

from models.conversions.refusals import utc_day
from models.errors import LannerError
from models.migrations.deferred import rollups_ready
from models.store.database import read_tx, write_tx
from models.store.meta import MetaStore
from models.store.retention import RetentionStore

CHUNK = 5000
PAUSE = 0.02  # Between chunks: the spool flusher takes the write lock in between.
DAY_MS = 86_400_000


def pruned_before(conn) -> int | None:
    """Unix ms before which raw clicks were deleted by a prune (None: never pruned)."""
    return MetaStore(conn).pruned_before()


class RetentionError(LannerError, ValueError):
    """A prune that cannot be done; the message is one sentence for the user."""


def parse_age(text: str) -> int:
    """`90d`, `12w`, `36h` as milliseconds; RetentionError otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", text)
    if not match:
        raise RetentionError(f"{text!r} is not an age such as 90d, 12w or 48h.")
    number, unit = int(match.group(1)), match.group(2)
    return number * {"h": 3_600_000, "d": DAY_MS, "w": 7 * DAY_MS}[unit]


def count_unheld(db: Database, older_than_ms: int, *, now_ms: int | None = None) -> int:
    """Of the clicks `prune_clicks` would delete, those the columnar history does not hold yet: gone
    for good once pruned (LANNER_RAW_RETENTION's deletion waits for the history; `lanner prune` does not)."""
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - older_than_ms
    with read_tx(db):
        return RetentionStore(db.connection()).count_unheld_before(cutoff)


def count_queued(db: Database, older_than_ms: int, *, now_ms: int | None = None) -> int:
    """Of the clicks older than the age, those changed since the history copied them: `prune_clicks`
    keeps them (the history reads them from the row store) until an append copies them again."""
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - older_than_ms
    with read_tx(db):
        return RetentionStore(db.connection()).count_queued_before(cutoff)


def prune_clicks(
    db: Database,
    older_than_ms: int,
    *,
    global_uniqueness_hours: float,
    now_ms: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Delete clicks created before now - older_than_ms but those queued for a fresh copy in the
    history (count_queued); return how many went."""
    conn = db.connection()
    store = RetentionStore(conn)
    campaigns = store.campaign_windows()
    window_hours = max([global_uniqueness_hours, *(hours for _, hours in campaigns)])
    if older_than_ms < window_hours * 3_600_000 + DAY_MS:
        raise RetentionError(
            f"Keep at least the uniqueness window plus a day ({window_hours / 24 + 1:g} days): "
            "uniqueness and debounce read recent clicks."
        )
    if not rollups_ready(conn):
        raise RetentionError(
            "The rollup backfill has not finished (`lanner db status`); pruning now would lose clicks "
            "from reports. Run `lanner db run-deferred` first."
        )
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - older_than_ms
    # Reports that read raw clicks refuse a range before the cutoff (models/reporting/reports.py).
    total = sum(store.count_clicks_before(campaign_id, cutoff) for campaign_id, _ in campaigns)
    if total:
        with write_tx(db):  # Before the first chunk goes: an interrupted prune is recorded too.
            MetaStore(conn).move_pruned_before(cutoff)
    deleted = 0
    for campaign_id, _ in campaigns:
        while True:
            with write_tx(db):
                gone = store.delete_clicks_before(campaign_id, cutoff, CHUNK)
            deleted += gone
            if on_progress and gone:
                on_progress(deleted, total)
            if gone < CHUNK:
                break
            time.sleep(PAUSE)
    return deleted


@dataclass(frozen=True)
class PrunedPostbacks:
    log_rows: int
    refusal_rows: int


def prune_postback_log(db: Database, keep_days: int, *, now_ms: int | None = None) -> PrunedPostbacks:
    """Delete postback log rows and refusal counters older than `keep_days` (0: keep everything)."""
    if keep_days <= 0:
        return PrunedPostbacks(0, 0)
    store = RetentionStore(db.connection())
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - keep_days * DAY_MS
    log_rows = 0
    while True:
        with write_tx(db):
            gone = store.delete_postback_log_before(cutoff, CHUNK)
        log_rows += gone
        if gone < CHUNK:
            break
        time.sleep(PAUSE)
    with write_tx(db):
        refusal_rows = store.delete_refusals_before(utc_day(cutoff))
    return PrunedPostbacks(log_rows, refusal_rows)
