"""Clicks only the columnar history holds (LANNER_RAW_RETENTION deleted them from the row store), found by
subid or by id: for a postback or a status correction of an old click, `lanner click show`, the click
log, and reports that need a click's dimensions (docs/analytics.md, "Old clicks").

Each lookup opens the history read-only under its shared lock (models/store/duckdb/connection.py), so it
never meets the appender inside DuckDB; it waits for that lock at most `wait` seconds (an append holds
the exclusive one for a chunk) and then raises HistoryBusy, so a web worker is never held long. A click
is given as a dict of the history's columns (models/store/duckdb/history.py HISTORY_COLUMNS: no ip and
no user agent; referrer_domain, not the referrer).

Only a subid whose time (models/clicks/record.py subid_ms, the click's created_at) is before the
row store's `pruned_before` can belong to a click the row store no longer has: `may_be_pruned` says so
from the subid alone, so a miss on a recent or made-up subid never opens DuckDB.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from peewee import Database

from models.clicks.record import subid_ms
from models.reporting.history import HistoryFiles, HistorySettings
from models.store.database import read_tx
from models.store.duckdb.connection import (
    HistoryBehind,
    HistoryIncomplete,
    HistoryMissing,
    open_history,
)
from models.store.duckdb.history import HISTORY_COLUMNS, ColumnarHistory
from models.store.history import ROW_COLUMNS, HistoryStore

LOOKUP_WAIT = 0.5  # Seconds a lookup waits for the shared lock: an append's chunk holds it ~0.5 s at most.


def may_be_pruned(subid: str, pruned_before: int | None) -> bool:
    """Whether a click with this subid may be in the history only: made before the prune cutoff."""
    made = subid_ms(subid)
    return pruned_before is not None and made is not None and made < pruned_before


def history_click(
    files: HistoryFiles, subid: str, *, wait: float | None = LOOKUP_WAIT
) -> dict[str, Any] | None:
    """The click with this subid as the history holds it, None if it holds none (or there is no history).
    HistoryBusy past `wait`; HistoryUnreadable if the file is damaged."""
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit, wait=wait) as conn:
            row = ColumnarHistory(conn, files.path.parent).click_by_subid(subid)
    except HistoryMissing:
        return None
    return dict(zip(HISTORY_COLUMNS, row, strict=True)) if row else None


def history_clicks(
    files: HistoryFiles, click_ids: list[int], *, wait: float | None = LOOKUP_WAIT
) -> dict[int, dict[str, Any]]:
    """The clicks with these ids that the history holds, by id ({} without a history)."""
    if not click_ids:
        return {}
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit, wait=wait) as conn:
            rows = ColumnarHistory(conn, files.path.parent).clicks_by_ids(sorted(set(click_ids)))
    except HistoryMissing:
        return {}
    return {row[0]: dict(zip(HISTORY_COLUMNS, row, strict=True)) for row in rows}


def history_log(
    files: HistoryFiles,
    equal: dict[str, Any],
    *,
    before_ms: int,
    since_ms: int | None,
    until_ms: int | None,
    cursor: tuple[int, int] | int | None,
    by_time: bool,
    limit: int,
    wait: float | None = LOOKUP_WAIT,
) -> list[dict[str, Any]]:
    """The click log's newest clicks created before `before_ms` the history holds (ColumnarHistory.log)."""
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit, wait=wait) as conn:
            rows = ColumnarHistory(conn, files.path.parent).log(
                equal,
                before_ms=before_ms,
                since_ms=since_ms,
                until_ms=until_ms,
                cursor=cursor,
                by_time=by_time,
                limit=limit,
            )
    except HistoryMissing:
        return []
    return [dict(zip(HISTORY_COLUMNS, row, strict=True)) for row in rows]


def history_sorted_log(
    files: HistoryFiles, equal: dict[str, Any], *, wait: float | None = LOOKUP_WAIT, **bounds: Any
) -> list[dict[str, Any]]:
    """The sorted click log's clicks the history holds (ColumnarHistory.sorted_log)."""
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit, wait=wait) as conn:
            rows = ColumnarHistory(conn, files.path.parent).sorted_log(equal, **bounds)
    except HistoryMissing:
        return []
    return [dict(zip(HISTORY_COLUMNS, row, strict=True)) for row in rows]


@dataclass(frozen=True)
class Answering:
    """The history open beside the row store's snapshot: it answers for the clicks with ids up to
    `position` but those `queued`; the row store for the rest."""

    columnar: ColumnarHistory
    position: int
    queued: list[int]


@contextlib.contextmanager
def answering_history(
    files: HistoryFiles, db: Database, *, since_ms: int | None, wait: float | None
) -> Iterator[Answering]:
    """The history under its shared lock, then one row-store snapshot, as reports read them
    (docs/analytics.md, "How a report reads it": no chunk commits in DuckDB meanwhile, so the row
    store's position and queue are at or behind what DuckDB holds). Raises what reports fall back on
    (models/store/duckdb/connection.py HISTORY_UNAVAILABLE): missing, damaged, locked past `wait`, out
    of memory, behind the row store, or made again after a prune and read from before it (`since_ms`
    None: from the start)."""
    with (
        open_history(files.path, write=False, memory_limit=files.memory_limit, wait=wait) as conn,
        read_tx(db),
    ):
        store = HistoryStore(db.connection())
        position, _ = store.state()
        columnar = ColumnarHistory(conn, files.path.parent)
        held = columnar.position()
        if held < position:
            raise HistoryBehind(files.path, held, position)
        complete_from = columnar.complete_from()
        if complete_from and (since_ms is None or since_ms < complete_from):
            moment = datetime.fromtimestamp(complete_from / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
            raise HistoryIncomplete(files.path, moment)
        queued = [click_id for click_id, _ in store.changes(0, position, 2**62)]
        yield Answering(columnar, position, queued)


def row_store_values(click: dict[str, Any]) -> tuple:
    """A history click as the row store's ROW_COLUMNS (its referrer is the domain the history kept)."""
    return tuple(click["referrer_domain" if column == "referrer" else column] for column in ROW_COLUMNS)


@dataclass(frozen=True)
class ClickHistory:
    """The lookups over one history file, handed to what needs old clicks (the postback recorder)."""

    files: HistoryFiles
    wait: float | None = LOOKUP_WAIT
    # Whether this node keeps the history (settings.py keeps_history): then the sorted click log reads
    # from it the clicks it holds, not only those the row store no longer has.
    answers: bool = False

    def by_subid(self, subid: str) -> dict[str, Any] | None:
        return history_click(self.files, subid, wait=self.wait)

    def by_ids(self, click_ids: list[int]) -> dict[int, dict[str, Any]]:
        return history_clicks(self.files, click_ids, wait=self.wait)

    def log(self, equal: dict[str, Any], **bounds: Any) -> list[dict[str, Any]]:
        return history_log(self.files, equal, wait=self.wait, **bounds)

    def sorted_log(self, equal: dict[str, Any], **bounds: Any) -> list[dict[str, Any]]:
        return history_sorted_log(self.files, equal, wait=self.wait, **bounds)


def click_history(settings: HistorySettings) -> ClickHistory:
    """The lookups over the history file settings name (settings.py's history_path, history_memory_limit);
    on a node that keeps none (cluster mode), the file is missing and every lookup finds nothing."""
    return ClickHistory(HistoryFiles.of(settings), answers=settings.keeps_history)
