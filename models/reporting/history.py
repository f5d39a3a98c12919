"""The columnar click history (issue 28, docs/analytics.md): every landed click copied from the row store
into an embedded DuckDB file, closed and idempotent; its status, its check against the row store and
the repair, and its rebuild.

An append (`append_history`, the worker's task every minute):
1. closes a watermark W in the row store (models/store/history.py: no click id at or below it can still
   be uncommitted) and records it as the target, so every mutation from then on of a click up to W is
   queued in history_change;
2. copies the clicks with id in (P, W] (P: DuckDB's own position) in chunks, each chunk one DuckDB
   transaction with the position it reaches; then moves the row store's `position` (what readers trust:
   DuckDB may be ahead of it, never behind), so a kill at any instant neither loses nor duplicates;
3. copies again the queued clicks up to the position (delete + insert in one DuckDB transaction), then
   forgets exactly the (click_id, seq) pairs it read: a click mutated meanwhile stays queued;
4. does 2 and 3 for the conversions (their own position, watermark and queue, closed with the clicks'
   in step 1): a changed conversion's copy is replaced, a deleted one's deleted.

A history file that cannot be opened is moved aside and the history made again from the row store; one
that was lost or replaced (behind the row store's position) is filled again from its own position. What
the row store no longer holds (clicks before `lanner prune`'s cutoff) cannot come back: that is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from peewee import Database

from models.reporting.compaction import compaction_status
from models.reporting.subidcube import build_cube_unlocked, cube_status
from models.store.database import read_tx, write_tx
from models.store.duckdb.connection import (
    HistoryMissing,
    HistoryUnreadable,
    appending,
    move_aside,
    open_history,
    remove_history,
    replace_history,
    transaction,
)
from models.store.duckdb.history import HOUR_MS, ColumnarHistory
from models.store.duckdb.subidcube import SubidCube
from models.store.history import ROW_COLUMNS, HistoryStore
from models.store.meta import MetaStore
from models.store.reports import referrer_domain


class HistorySettings(Protocol):
    """What of settings.py's Settings the history reads (the domain does not import settings)."""

    @property
    def history_path(self) -> Path: ...
    @property
    def history_memory_limit(self) -> str: ...
    @property
    def keeps_history(self) -> bool: ...


logger = logging.getLogger(__name__)

CHUNK = (
    50_000  # Clicks a DuckDB transaction appends (and re-copies): ~0.5 s of work, a reader's longest wait.
)
REFERRER = ROW_COLUMNS.index("referrer")
# The cost sums of an hour agree when they differ by no more than this share (float sums in another order).
COST_TOLERANCE = 1e-9

# (clicks copied so far, the position reached, the watermark): after each chunk's DuckDB commit.
ChunkCallback = Callable[[int, int, int], None]


@dataclass(frozen=True)
class HistoryFiles:
    """Where the history lives and what DuckDB may use (settings.py's history_path, history_memory_limit)."""

    path: Path
    memory_limit: str = "256MB"
    # Seconds a report waits for the shared lock (an append holds it ~0.5 s a chunk) before it counts
    # the row store's clicks instead.
    read_wait: float = 5.0

    @classmethod
    def of(cls, settings: HistorySettings) -> HistoryFiles:
        return cls(settings.history_path, settings.history_memory_limit)

    @classmethod
    def for_reports(cls, settings: HistorySettings) -> HistoryFiles | None:
        """What reports read, or None on a cluster node that keeps no history (its file is another
        node's: reports there read the rollups and the row store, as without one)."""
        return cls.of(settings) if settings.keeps_history else None


@dataclass(frozen=True)
class AppendResult:
    copied: int  # New clicks.
    recopied: int  # Clicks mutated since they were copied.
    position: int
    restarted_from: int | None = None  # The position a lost or damaged file was filled again from.
    lost: int = 0  # Of the clicks after it, those pruned from the row store: no file has them now.
    conversions: int = 0  # New conversions.
    reconverted: int = 0  # Conversions changed (or deleted) since they were copied.


def columnar(rows: list[tuple]) -> list[tuple]:
    """Row-store rows (ROW_COLUMNS) as the history's (its referrer as referrer_domain)."""
    return [(*row[:REFERRER], referrer_domain(row[REFERRER]), *row[REFERRER + 1 :]) for row in rows]


def append_history(
    db: Database, files: HistoryFiles, *, chunk: int = CHUNK, on_chunk: ChunkCallback | None = None
) -> AppendResult:
    """Copy the clicks landed and mutated since the last append; HistoryBusy if another process appends."""
    with appending(files.path):
        return _append(db, files, chunk, on_chunk)


def _writing(files: HistoryFiles, path: Path | None = None):
    return open_history(path or files.path, write=True, memory_limit=files.memory_limit)


def _open_position(db: Database, files: HistoryFiles) -> tuple[int, int | None, int]:
    """DuckDB's position (the file made if missing, moved aside and made again if damaged), the
    position it was filled again from if it was lost, replaced or damaged (None if not), and how many
    clicks after that position the row store no longer holds: only the lost file had them."""
    last_click = None
    try:
        with _writing(files) as conn:
            history = ColumnarHistory(conn, files.path.parent)
            history.create()
            position = history.position()
            if position < HistoryStore(db.connection()).state()[0]:
                last_click = history.count()[2]  # Where an older copy's clicks end.
    except HistoryUnreadable as error:
        aside = move_aside(files.path, f"damaged-{int(time.time())}")
        logger.warning("%s Moved to %s; making the history again from the row store.", error, aside)
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).create()
        position = 0
    store = HistoryStore(db.connection())
    trusted, _ = store.state()
    if position > trusted:
        position = _check_ahead(db, files, position, trusted)
    pruned = MetaStore(db.connection()).pruned_before()
    if pruned and (position == 0 or position < trusted):
        # Filled (again) from a row store that lacks what was pruned: reports must not read that time here.
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).mark_complete_from(pruned)
    if position >= trusted:
        return position, None, 0
    with write_tx(db):
        store.set_position(position)  # Readers go to the row store until it is filled again.
        held = store.held_between(position, trusted)
    lost = max(0, trusted - position - held)
    logger.warning(
        "The click history is behind the row store (position %s, trusted %s: the file was lost, replaced or "
        "damaged); copying again from click %s: %s.",
        position,
        trusted,
        position,
        lost_clicks(lost, pruned, last_click),
    )
    return position, position, lost if pruned else 0


def _open_conversion_position(db: Database, files: HistoryFiles) -> int:
    """DuckDB's conversion position to go on from. Behind the row store's (a file lost, replaced or made
    again): the row store's goes back to it (every conversion is still there to copy). Ahead: a kill
    between the two commits (the same conversions), unless its conversion at that id differs from the
    row store's (a file that went on past this database): then cut back to what the row store trusts."""
    store = HistoryStore(db.connection())
    with read_tx(db):
        trusted, _ = store.conversion_state()
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        history = ColumnarHistory(conn, files.path.parent)
        position = history.conversion_position() or 0  # `_open_position` made the table if missing.
        held = history.conversion_at(position) if position > trusted else None
    if position < trusted:
        with write_tx(db):
            store.set_conversion_position(position)  # Readers go to the row store until it is filled again.
        logger.warning(
            "The click history's conversions are behind the row store (position %s, trusted %s); "
            "copying them again from conversion %s.",
            position,
            trusted,
            position,
        )
    elif position > trusted:
        with read_tx(db):
            row = store.conversion_rows_of([position])
        if not row or held is None or (row[0][1], row[0][3]) != tuple(held):
            with _writing(files) as conn:
                gone = ColumnarHistory(conn, files.path.parent).cut_back_conversions(trusted)
            logger.warning(
                "The click history's conversions went on past this database (to conversion %s): its %s "
                "conversions after conversion %s were taken out and are copied again from the row store.",
                position,
                gone,
                trusted,
            )
            return trusted
    return position


def _check_ahead(db: Database, files: HistoryFiles, position: int, trusted: int) -> int:
    """DuckDB ahead of what the row store trusts: normally a kill between DuckDB's commit and the row
    store's (the same clicks). But a file that went on past the database it now serves — a live install
    copied by `lanner db copy`, a database restored by hand — holds clicks the row store never got, under
    ids it hands out again: its click at the position is missing (the row store ends before it) or has
    another subid. Then the file is cut back to the trusted position and the rest copied again."""
    with read_tx(db):
        store = HistoryStore(db.connection())
        max_id = store.max_id()
        row = store.rows_of([position])
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        held = ColumnarHistory(conn, files.path.parent).clicks_by_ids([position])
    if max_id >= position and (not row or not held or row[0][-1] == held[0][-1]):
        return position  # The same clicks (or one `lanner prune` deleted since): go on from DuckDB's.
    with _writing(files) as conn:
        gone = ColumnarHistory(conn, files.path.parent).cut_back(trusted)
    logger.warning(
        "The click history went on past this database (to click %s; the database ends at click %s or has "
        "other clicks under those ids): its %s clicks after click %s were taken out and are copied again "
        "from the row store.",
        position,
        max_id,
        gone,
        trusted,
    )
    return trusted


def lost_clicks(lost: int, pruned: int | None, after: int | None = None) -> str:
    """The sentence naming the clicks no history file can give back: `lost` click ids the row store no
    longer holds (pruned before `pruned`, Unix ms), created after `after` (the last click a surviving
    older file holds) if known. On PostgreSQL ids a sequence skipped count too: "up to"."""
    if not pruned:
        return "every click is still in the row store"
    if not lost:
        return (
            f"clicks before {_utc(pruned)} were pruned from the row store, but none after the file's position"
        )
    since = f"after {_utc(after)} and " if after is not None else ""
    return (
        f"up to {lost:,} clicks created {since}before {_utc(pruned)} were pruned from the row store and only "
        "the lost file held them: they cannot be rebuilt"
    )


def _append(db: Database, files: HistoryFiles, chunk: int, on_chunk: ChunkCallback | None) -> AppendResult:
    position, restarted_from, lost = _open_position(db, files)
    store = HistoryStore(db.connection())
    with write_tx(db):
        watermark = store.close_watermark()
    copied = 0
    while position < watermark:
        with read_tx(db):
            rows = store.rows_after(position, watermark, chunk)
        reached = rows[-1][0] if len(rows) == chunk else watermark
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).append(columnar(rows), reached)
        copied += len(rows)
        if on_chunk is not None:
            on_chunk(copied, reached, watermark)
        with write_tx(db):
            store.set_position(reached)
        position = reached
    with write_tx(db):
        if store.state()[0] < position:  # A kill after DuckDB's last commit left it behind.
            store.set_position(position)
    recopied = _recopy_changes(db, files, position, chunk)
    conversions, reconverted = _append_conversions(db, files, chunk)
    return AppendResult(copied, recopied, position, restarted_from, lost, conversions, reconverted)


def _append_conversions(db: Database, files: HistoryFiles, chunk: int) -> tuple[int, int]:
    """Copy the conversions up to the watermark `_append` closed, then the changed ones again: (copied,
    copied again). As the clicks': DuckDB commits first, the row store's position follows."""
    position = _open_conversion_position(db, files)
    store = HistoryStore(db.connection())
    with read_tx(db):
        _, watermark = store.conversion_state()
    copied = 0
    while position < watermark:
        with read_tx(db):
            rows = store.conversion_rows_after(position, watermark, chunk)
        reached = rows[-1][0] if len(rows) == chunk else watermark
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).append_conversions(rows, reached)
        copied += len(rows)
        with write_tx(db):
            store.set_conversion_position(reached)
        position = reached
    with write_tx(db):
        if store.conversion_state()[0] < position:  # A kill after DuckDB's last commit left it behind.
            store.set_conversion_position(position)
    return copied, _recopy_conversion_changes(db, files, position, chunk)


def _recopy_conversion_changes(db: Database, files: HistoryFiles, position: int, chunk: int) -> int:
    """Copy again the queued conversions up to the position (one the row store no longer has is only
    deleted); forget the (conversion_id, seq) pairs read."""
    store = HistoryStore(db.connection())
    after, recopied = 0, 0
    while True:
        with read_tx(db):  # The queue and the rows in one snapshot: each row at least as new as its seq.
            pairs = store.conversion_changes(after, position, chunk)
            rows = store.conversion_rows_of([conversion_id for conversion_id, _ in pairs])
        if not pairs:
            return recopied
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).append_conversions(
                rows, None, replace=[conversion_id for conversion_id, _ in pairs]
            )
        with write_tx(db):
            store.forget_conversions(pairs)
        recopied += len(pairs)
        after = pairs[-1][0]


def _recopy_changes(db: Database, files: HistoryFiles, position: int, chunk: int) -> int:
    """Copy again the queued clicks up to the position; forget the (click_id, seq) pairs read."""
    store = HistoryStore(db.connection())
    after, recopied = 0, 0
    while True:
        with read_tx(db):  # The queue and the rows in one snapshot: each row at least as new as its seq.
            pairs = store.changes(after, position, chunk)
            rows = store.rows_of([click_id for click_id, _ in pairs])
        if not pairs:
            return recopied
        # A click no longer in the row store (pruned) keeps its copy.
        with _writing(files) as conn:
            ColumnarHistory(conn, files.path.parent).append(
                columnar(rows), None, replace=[r[0] for r in rows]
            )
        with write_tx(db):
            store.forget(pairs)
        recopied += len(rows)
        after = pairs[-1][0]


# -- status ------------------------------------------------------------------------------------------


def history_status(db: Database, files: HistoryFiles, now_ms: int | None = None) -> dict:
    """Where the history stands against the row store: positions, lag (clicks and seconds), its file's
    size and bytes per click, the mutations still queued; `state` ok, missing or unreadable."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    store = HistoryStore(db.connection())
    with read_tx(db):
        position, target = store.state()
        max_id = store.max_id()
        pending = store.pending()
        behind = store.rows_after(position, max_id, 1)
        conversion_position, _ = store.conversion_state()
        max_conversion_id = store.max_conversion_id()
        pending_conversions = store.pending_conversions()
    status: dict = {
        "state": "ok",
        "position": position,
        "row_store_max_id": max_id,
        "lag_clicks": max_id - position,
        "lag_seconds": round((now_ms - behind[0][1]) / 1000, 1) if behind else 0.0,
        "pending_changes": pending,
        "conversion_position": conversion_position,
        "conversion_lag": max_conversion_id - conversion_position,
        "pending_conversion_changes": pending_conversions,
        "file": str(files.path),
        "file_bytes": _file_bytes(files.path),
        "history_position": None,
        "history_clicks": None,
        "history_conversions": None,
        "bytes_per_click": None,
        "first_click_at": None,
        "last_click_at": None,
        "compacted_before": None,
        "compaction_days_left": None,
        "cube_days": None,
        "cube_stale_days": None,
        "cube_last_day": None,
        "cube_rows": None,
        "cube_days_left": None,
        "error": "",
    }
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
            history = ColumnarHistory(conn, files.path.parent)
            clicks, first, last = history.count()
            status["history_position"] = history.position()
            status["history_conversions"] = history.conversion_count()
            status.update(compaction_status(conn))
            status.update(cube_status(conn))
    except HistoryMissing as error:
        status.update(state="missing", error=str(error))
        return status
    except HistoryUnreadable as error:
        status.update(state="unreadable", error=str(error))
        return status
    status.update(
        history_clicks=clicks,
        bytes_per_click=round(status["file_bytes"] / clicks, 1) if clicks else None,
        first_click_at=_utc(first) if first is not None else None,
        last_click_at=_utc(last) if last is not None else None,
    )
    return status


def history_count_up_to(files: HistoryFiles, position: int) -> int | None:
    """How many clicks the history holds up to an id; None without a readable file."""
    try:
        with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
            return ColumnarHistory(conn, files.path.parent).count_up_to(position)
    except (HistoryMissing, HistoryUnreadable):
        return None


def _file_bytes(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


# -- verify and repair -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HourMismatch:
    hour: int  # Unix ms of its start, UTC.
    history_clicks: int
    row_clicks: int
    history_cost: float
    row_cost: float

    @property
    def hour_utc(self) -> str:
        return _utc(self.hour)


@dataclass(frozen=True)
class ConversionMismatch:
    """An hour (of the conversions' clicks) and currency whose conversions differ between the stores."""

    hour: int  # Unix ms of its start, UTC.
    currency: str
    history_conversions: int
    row_conversions: int
    history_payout: float
    row_payout: float
    history_report_payout: float
    row_report_payout: float

    @property
    def hour_utc(self) -> str:
        return _utc(self.hour)


@dataclass(frozen=True)
class CubeMismatch:
    """A UTC day whose sub id cube differs from the history's clicks of that day (it should never)."""

    day: int  # Unix ms of its start.
    cube_clicks: int
    history_clicks: int
    cube_cost: float
    history_cost: float

    @property
    def day_utc(self) -> str:
        return _utc(self.day)[:10]


@dataclass(frozen=True)
class VerifyResult:
    position: int
    hours: int  # Hours compared.
    mismatches: list[HourMismatch]
    pruned_hours: int  # Hours before `lanner prune`'s cutoff: only the history holds them.
    repaired: int = 0  # Hours copied again (--repair).
    conversion_position: int = 0
    conversion_hours: int = 0  # (Hour, currency) pairs of conversions compared.
    conversion_mismatches: list[ConversionMismatch] = field(default_factory=list)
    conversions_repaired: int = 0  # Hours whose conversions were copied again (--repair).
    cube_days: int = 0  # Days of the sub id cube compared with the history's clicks.
    cube_mismatches: list[CubeMismatch] = field(default_factory=list)
    cube_repaired: int = 0  # Days of the cube built again (--repair).

    @property
    def is_consistent(self) -> bool:
        return (
            (not self.mismatches or self.repaired == len(self.mismatches))
            and (
                not self.conversion_mismatches
                or self.conversions_repaired == len({m.hour for m in self.conversion_mismatches})
            )
            and self.cube_repaired == len(self.cube_mismatches)
        )


def verify_history(db: Database, files: HistoryFiles, *, repair: bool = False) -> VerifyResult:
    """Compare clicks and cost per hour, history against row store, for the clicks up to the trusted
    position but those queued (their copy is due); with `repair`, copy the mismatched hours again.
    HistoryMissing / HistoryUnreadable if there is no file to compare, HistoryBusy (repair) if another
    process is appending."""
    if not repair:
        return _verify(db, files)
    with appending(files.path):
        result = _verify(db, files)
        for mismatch in result.mismatches:
            _repair_hour(db, files, mismatch.hour, result.position)
        hours = sorted({mismatch.hour for mismatch in result.conversion_mismatches})
        for hour in hours:
            _repair_conversion_hour(db, files, hour, result.conversion_position)
        # After the hours' repairs (which mark their days stale), the days found wrong built again.
        for wrong in result.cube_mismatches:
            with _writing(files) as conn, transaction(conn):
                SubidCube(conn).build_day(wrong.day)
        return replace(
            result,
            repaired=len(result.mismatches),
            conversions_repaired=len(hours),
            cube_repaired=len(result.cube_mismatches),
        )


def _verify(db: Database, files: HistoryFiles) -> VerifyResult:
    store = HistoryStore(db.connection())
    # The shared lock held across both reads: no chunk commits in DuckDB meanwhile, and the row store's
    # position and queue, read in one snapshot, can only be at or behind what DuckDB holds.
    with open_history(files.path, write=False, memory_limit=files.memory_limit) as conn:
        with read_tx(db):
            position, _ = store.state()
            pending = [click_id for click_id, _ in store.changes(0, position, 2**62)]
            row_hours = {hour: (clicks, cost) for hour, clicks, cost in store.hours(position)}
            pruned = MetaStore(db.connection()).pruned_before()
            conversion_position, _ = store.conversion_state()
            pending_conversions = [
                conversion_id for conversion_id, _ in store.conversion_changes(0, conversion_position, 2**62)
            ]
            row_conversions = {
                (hour, code): sums for hour, code, *sums in store.conversion_hours(conversion_position)
            }
        history = ColumnarHistory(conn, files.path.parent)
        history_hours = {hour: (clicks, cost) for hour, clicks, cost in history.hours(position, pending)}
        history_conversions = {
            (hour, code): sums
            for hour, code, *sums in history.conversion_hours(conversion_position, pending_conversions)
        }
        cube = SubidCube(conn)
        # The cube against the file's own clicks (all of them, as it sums them).
        cube_days = cube.check() if cube.exists() else []
    # The hour holding the prune's cutoff is partly pruned: compared from the next one.
    first_whole = -(-pruned // HOUR_MS) * HOUR_MS if pruned else None
    mismatches, pruned_hours, compared = [], 0, 0
    for hour in sorted(row_hours.keys() | history_hours.keys()):
        if first_whole is not None and hour < first_whole:
            pruned_hours += 1
            continue
        compared += 1
        h_clicks, h_cost = history_hours.get(hour, (0, 0.0))
        r_clicks, r_cost = row_hours.get(hour, (0, 0.0))
        if h_clicks != r_clicks or not _same_money(h_cost, r_cost):
            mismatches.append(HourMismatch(hour, h_clicks, r_clicks, h_cost, r_cost))
    # Conversions never leave the row store (a converted click stays): every hour is compared.
    conversion_mismatches = []
    for hour, code in sorted(row_conversions.keys() | history_conversions.keys()):
        h_count, h_payout, h_report = history_conversions.get((hour, code), [0, 0.0, 0.0])
        r_count, r_payout, r_report = row_conversions.get((hour, code), [0, 0.0, 0.0])
        if h_count != r_count or not _same_money(h_payout, r_payout) or not _same_money(h_report, r_report):
            conversion_mismatches.append(
                ConversionMismatch(
                    hour, code, int(h_count), int(r_count), h_payout, r_payout, h_report, r_report
                )
            )
    return VerifyResult(
        position,
        compared,
        mismatches,
        pruned_hours,
        conversion_position=conversion_position,
        conversion_hours=len(row_conversions.keys() | history_conversions.keys()),
        conversion_mismatches=conversion_mismatches,
        cube_days=len(cube_days),
        cube_mismatches=[
            CubeMismatch(day, cube_clicks, clicks, cube_cost, cost)
            for day, day_clicks, cube_clicks, cube_cost, clicks, cost in cube_days
            if not day_clicks == cube_clicks == clicks or not _same_money(cube_cost, cost)
        ],
    )


def _same_money(history: float, row: float) -> bool:
    """Float sums taken in another order agree within COST_TOLERANCE of their size."""
    return abs(history - row) <= COST_TOLERANCE * max(1.0, abs(row))


def _repair_hour(db: Database, files: HistoryFiles, hour: int, position: int) -> None:
    """Replace the history's clicks of an hour up to the position with the row store's."""
    with read_tx(db):
        rows = HistoryStore(db.connection()).hour_rows(hour, position)
    with _writing(files) as conn:
        ColumnarHistory(conn, files.path.parent).append(columnar(rows), None, hour=(hour, position))


def _repair_conversion_hour(db: Database, files: HistoryFiles, hour: int, position: int) -> None:
    """Replace the history's conversions of an hour's clicks up to the position with the row store's."""
    with read_tx(db):
        rows = HistoryStore(db.connection()).conversion_hour_rows(hour, position)
    with _writing(files) as conn:
        ColumnarHistory(conn, files.path.parent).append_conversions(rows, None, hour=(hour, position))


# -- rebuild ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RebuildResult:
    clicks: int
    position: int
    first_click_at: str | None
    last_click_at: str | None
    pruned_before: str | None  # Clicks before this were pruned from the row store.
    carried: int = 0  # Of those, the ones the old file held, kept in the new one.
    carry_error: str = ""  # Why the old file's could not be kept (it could not be read), if so.
    lost: int = 0  # Clicks pruned from the row store that no file held (the old one missing or unreadable).
    conversions: int = 0  # Conversions copied (every one the row store holds up to the watermark).


def rebuild_history(
    db: Database, files: HistoryFiles, *, chunk: int = CHUNK, on_chunk: ChunkCallback | None = None
) -> RebuildResult:
    """Make the history again from the row store into a new file, then put it in the old one's place
    (an atomic rename); the old one is served until then. The clicks the row store no longer has are
    carried over from the old file if it can be read. HistoryBusy if another process appends."""
    fresh = files.path.with_name(files.path.name + ".rebuild")
    store = HistoryStore(db.connection())
    with appending(files.path):
        remove_history(fresh)
        with _writing(files, fresh) as conn:
            ColumnarHistory(conn, files.path.parent).create()
        with write_tx(db):
            watermark = store.close_watermark()
        position, copied = 0, 0
        while position < watermark:
            with read_tx(db):
                rows = store.rows_after(position, watermark, chunk)
            reached = rows[-1][0] if len(rows) == chunk else watermark
            with _writing(files, fresh) as conn:
                ColumnarHistory(conn, files.path.parent).append(columnar(rows), reached)
            copied += len(rows)
            position = reached
            if on_chunk is not None:
                on_chunk(copied, reached, watermark)
        with read_tx(db):
            _, conversion_watermark = store.conversion_state()
        conversions, at = 0, 0
        while at < conversion_watermark:  # Every conversion is in the row store: all come from there.
            with read_tx(db):
                rows = store.conversion_rows_after(at, conversion_watermark, chunk)
            at = rows[-1][0] if len(rows) == chunk else conversion_watermark
            with _writing(files, fresh) as conn:
                ColumnarHistory(conn, files.path.parent).append_conversions(rows, at)
            conversions += len(rows)
        with read_tx(db):
            first, last = store.period(watermark)
        pruned = MetaStore(db.connection()).pruned_before()  # Only moves forward: the rebuild's latest.
        carried, carry_error = 0, ""
        if files.path.exists():  # The clicks only the old file holds (LANNER_RAW_RETENTION) stay.
            try:
                with _writing(files, fresh) as conn:
                    carried = ColumnarHistory(conn, files.path.parent).carry_over(files.path, watermark)
            except HistoryUnreadable as error:
                carry_error = str(error)
                logger.warning("%s The rebuilt history has only what the row store holds.", error)
        if pruned and (carry_error or not files.path.exists()):
            # Copied from a row store that lacks what was pruned: reports must not read that time here.
            # (Carried over, the old file's clicks came with its own mark.)
            with _writing(files, fresh) as conn:
                ColumnarHistory(conn, files.path.parent).mark_complete_from(pruned)
        # The sub id cube of the closed days, before the file is served: reports of them stay quick.
        build_cube_unlocked(replace(files, path=fresh), is_unread=True)
        replace_history(fresh, files.path)
        with write_tx(db):
            # The queues stay: a click or conversion changed while it was copied is copied again by
            # the next append.
            store.set_position(watermark)
            store.set_conversion_position(conversion_watermark)
    return RebuildResult(
        copied,
        watermark,
        _utc(first) if first is not None else None,
        _utc(last) if last is not None else None,
        _utc(pruned) if pruned else None,
        carried,
        carry_error,
        max(0, watermark - copied - carried) if pruned else 0,
        conversions,
    )
