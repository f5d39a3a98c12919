"""Online backup and restore of the database file and its columnar click history: `lanner backup` and
`lanner restore`.

A backup is taken with SQLite's online backup API in one step: a consistent snapshot while the
tracker keeps serving (in WAL mode the copy's read transaction blocks no writer). Clicks still in
the spool at that moment are not in it; they land in the live database as usual.

With LANNER_RAW_RETENTION the history (DATA_DIR/history/clicks.duckdb) is the only copy of the clicks
older than the retention, so the backup copies it too, beside the database copy (`<file>.history.duckdb`).
Both copies are taken holding the history's append.lock (every writer of the file holds it: appends,
retention, rebuild, repair; the worker's append skips its minute meanwhile) and the file itself is
copied under the shared lock (no writer has it open): the history cannot change while the database is
copied, so the pair is consistent — the database trusts the history up to its position, the history
holds at least that much, and every click the database's retention deleted is in the history. The
history's position and click count are written into the database copy, so a restore knows the file
that goes with it.

A restore replaces the database file while nothing has it open, and moves the spool aside: its
journal belongs to the database being replaced, and its position would not match the restored one.
The history taken with the backup replaces the box's (moved aside, never deleted). Without one, the
box's history is kept and made consistent with the restored database: cut back to the database's
position if it is ahead (the restored database hands those click ids out again), or trusted only up to
its own position if it is behind (the next append copies the rest again from the restored database);
each says what it did and which clicks no file holds any more.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from models.errors import LannerError
from models.reporting.history import HistoryFiles
from models.store.duckdb.connection import (
    HistoryBusy,
    HistoryMissing,
    HistoryUnreadable,
    copy_history,
    holding_writers,
    install_history,
    move_aside,
    open_copy,
    open_history,
)
from models.store.duckdb.history import ColumnarHistory
from models.store.files import (
    FILE_ERRORS,
    CopyHistory,
    check_lanner_file,
    copy_database,
    history_of_copy,
    record_backup_history,
    settle_restored_history,
    start_spool_after,
)

HISTORY_SUFFIX = ".history.duckdb"
# How long a backup or restore waits for an append (or retention run, rebuild, repair) to finish.
WRITER_WAIT = 120.0
HISTORY_BUSY = (
    f"The click history has been busy (an append, retention run or rebuild) for {WRITER_WAIT:.0f} s; "
    "try the backup again in a few minutes."
)


class BackupError(LannerError, RuntimeError):
    """A backup or restore that cannot be done; the message is one sentence for the user."""


def history_copy_path(backup: Path) -> Path:
    """Where the history taken with a database backup lies: beside it."""
    return backup.with_name(backup.name + HISTORY_SUFFIX)


@dataclass(frozen=True)
class BackupResult:
    size: int  # Bytes of the database copy and the history copy.
    history: Path | None  # The history's copy (None: none was taken, `note` says why).
    history_clicks: int = 0
    history_position: int = 0
    note: str = ""


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms / 1000))


def backup_database(database_path: Path, target: Path, history: HistoryFiles | None = None) -> BackupResult:
    """Copy the live database to `target` (which must not exist), and the history beside it."""
    history_target = history_copy_path(target)
    for path in (target, history_target):
        if path.exists():
            raise BackupError(f"{path} already exists; choose a new file name.")
    if not database_path.is_file():
        raise BackupError(f"There is no database at {database_path}.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    if history is None or not history.path.exists():
        copy_database(database_path, partial)
        os.replace(partial, target)
        return BackupResult(target.stat().st_size, None, note="There is no click history to back up yet.")
    history_partial = history_target.with_name(history_target.name + ".partial")
    try:
        with holding_writers(history.path, WRITER_WAIT):
            with open_history(history.path, write=False, memory_limit=history.memory_limit) as conn:
                held = ColumnarHistory(conn, history.path.parent)
                position, clicks = held.position(), held.count()[0]
            copy_history(history.path, history_partial)
            copy_database(database_path, partial)
    except HistoryBusy:
        raise BackupError(HISTORY_BUSY) from None
    except (HistoryMissing, HistoryUnreadable) as error:
        # The database is backed up all the same: it is the system of record.
        copy_database(database_path, partial)
        os.replace(partial, target)
        return BackupResult(target.stat().st_size, None, note=f"The click history was not backed up: {error}")
    record_backup_history(partial, position, clicks)
    size = place_backup(partial, target, history_partial, history_target)
    return BackupResult(size, history_target, clicks, position)


def place_backup(partial: Path, target: Path, history_partial: Path, history_target: Path) -> int:
    """Move a finished backup's history copy (and its WAL) into place, then its database copy, the
    one a restore looks for first; their bytes together."""
    os.replace(history_partial, history_target)
    wal = history_partial.with_name(history_partial.name + ".wal")
    if wal.exists():
        os.replace(wal, history_target.with_name(history_target.name + ".wal"))
    os.replace(partial, target)
    return sum(p.stat().st_size for p in (target, history_target))


def processes_using(path: Path) -> list[int]:
    """Pids that have `path` open (Linux /proc); the restore refuses to swap the file under them."""
    wanted = {str(path.resolve()), f"{path.resolve()}-wal"}
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except (PermissionError, FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue
        if links & wanted:
            pids.append(int(entry.name))
    return pids


@dataclass(frozen=True)
class RestoreResult:
    spool_moved: Path | None  # Where the old spool went (None: there was none).
    history: list[str] = field(default_factory=list)  # What was done with the click history, sentences.


def restore_database(
    backup: Path, database_path: Path, spool_dir: Path, history: HistoryFiles | None = None
) -> RestoreResult:
    """Replace the database with `backup` (and the history with the one taken with it, or make the
    box's consistent with it); say what was done with the history."""
    if not backup.is_file():
        raise BackupError(f"There is no backup file {backup}.")
    try:
        verdict = check_lanner_file(backup)
    except FILE_ERRORS as exc:
        raise BackupError(f"{backup} is not a Lanner database ({exc}).") from None
    if verdict != "ok":
        raise BackupError(f"{backup} is damaged: {verdict}.")
    facts = history_of_copy(backup)
    companion = history_copy_path(backup)
    taken = taken_history(companion, facts, history) if history and companion.exists() else None
    users = processes_using(database_path)
    if users:
        raise BackupError(
            f"The database is open in process(es) {', '.join(map(str, users))}: "
            "stop lanner serve and lanner worker first."
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moved = None
    if spool_dir.exists() and any(spool_dir.iterdir()):
        moved = spool_dir.with_name(f"{spool_dir.name}.before-restore-{stamp}")
        spool_dir.rename(moved)
    incoming = database_path.with_name(database_path.name + ".restoring")
    incoming.write_bytes(backup.read_bytes())
    start_spool_after(incoming, int(time.time() * 1000))
    notes: list[str] = []
    if history is not None:
        restored = _SqliteCopy(incoming, facts)
        try:
            with holding_writers(history.path, WRITER_WAIT):
                if taken is not None:
                    notes = install_taken(companion, taken, restored, history, stamp)
                else:
                    notes = reconcile_history(history_copy_path(backup).name, restored, history, stamp)
        except HistoryBusy:
            incoming.unlink()
            raise BackupError(
                "Another process is writing the click history: stop lanner worker first."
            ) from None
        except BaseException:
            incoming.unlink(missing_ok=True)  # The database stays as it was.
            raise
    for suffix in ("-wal", "-shm"):
        database_path.with_name(database_path.name + suffix).unlink(missing_ok=True)
    os.replace(incoming, database_path)
    return RestoreResult(moved, notes)


def taken_history(companion: Path, facts: CopyHistory | None, history: HistoryFiles) -> tuple[int, int]:
    """(position, clicks) of the history copy beside a backup, checked against what the backup recorded."""
    try:
        with open_copy(companion, memory_limit=history.memory_limit) as conn:
            held = ColumnarHistory(conn, companion.parent)
            position, clicks = held.position(), held.count()[0]
    except HistoryUnreadable as error:
        raise BackupError(
            f"The click history {companion} cannot be read ({error.cause}); move it away to restore the "
            "database without it."
        ) from None
    if facts is not None and facts.backup_position is not None:
        if (position, clicks) != (facts.backup_position, facts.backup_clicks):
            raise BackupError(
                f"{companion} is not the click history taken with this backup (it holds {clicks:,} clicks up "
                f"to click {position}; the backup was taken with {facts.backup_clicks:,} up to click "
                f"{facts.backup_position}); move it away to restore the database without it."
            )
    return position, clicks


class Restored(Protocol):
    """The database a restore puts in place, as the history's reconciliation sees it (a SQLite copy
    here; a restored PostgreSQL database in models/ops/pgbackup.py)."""

    @property
    def facts(self) -> CopyHistory | None: ...

    def settle(self, position: int | None) -> None:
        """Forget which history its backup went with; with `position`, trust the history only up to it."""

    def pruned_between(self, after: int, up_to: int) -> int:
        """Click ids in (after, up_to] it no longer holds (pruned: only a history had them)."""
        ...


class _SqliteCopy:
    def __init__(self, path: Path, facts: CopyHistory | None) -> None:
        self.path = path
        self.facts = facts

    def settle(self, position: int | None) -> None:
        settle_restored_history(self.path, position)

    def pruned_between(self, after: int, up_to: int) -> int:
        assert self.facts is not None
        return self.facts.pruned_between(self.path, after, up_to)


def install_taken(
    companion: Path, taken: tuple[int, int], restored: Restored, history: HistoryFiles, stamp: str
) -> list[str]:
    """Put the history taken with the backup in place (the box's moved aside), consistent with the
    restored database; say what was done."""
    facts = restored.facts
    position, clicks = taken
    aside = install_history(companion, history.path, f"before-restore-{stamp}")
    notes = [f"Restored the click history taken with the backup: {clicks:,} clicks, up to click {position}."]
    if aside is not None:
        notes.append(f"The click history that was here was moved to {aside}.")
    if facts is None:
        restored.settle(None)
        return notes
    # A pair taken by `lanner backup` matches (the history at or ahead of what the database trusts, never
    # past its clicks); a file put beside a backup by hand is aligned as the box's own would be.
    if facts.position <= position <= facts.max_click_id:
        restored.settle(None)
        return notes
    return notes + _align(restored, facts, taken, history)


def reconcile_history(
    companion_name: str, restored: Restored, history: HistoryFiles, stamp: str
) -> list[str]:
    """No history taken with the backup: make the box's consistent with the restored database."""
    facts = restored.facts
    notes = [f"The backup has no click history beside it ({companion_name})."]
    live: tuple[int, int] | None = None
    error = ""
    try:
        with open_history(history.path, write=False, memory_limit=history.memory_limit) as conn:
            held = ColumnarHistory(conn, history.path.parent)
            live = held.position(), held.count()[0]
    except HistoryMissing:
        error = "There is no click history here"
    except HistoryUnreadable:
        aside = move_aside(history.path, f"damaged-{stamp}")
        error = f"The click history here cannot be read (moved to {aside})"
    if facts is None:  # A backup from before the history: nothing in it says what the history may hold.
        if live is not None:
            aside = move_aside(history.path, f"before-restore-{stamp}")
            notes.append(
                f"The database is from before the click history; the history here was moved to {aside}."
            )
        notes.append("The worker makes the click history again from the restored database.")
        return notes
    if live is None:
        restored.settle(0)
        notes.append(f"{error}: the worker makes it again from the restored database.")
        notes.extend(_lost(restored, facts, 0))
        return notes
    return notes + _align(restored, facts, live, history)


def _align(restored: Restored, facts: CopyHistory, live: tuple[int, int], history: HistoryFiles) -> list[str]:
    """Make the history at `history.path` (its position and clicks `live`) consistent with the restored
    database: cut back if ahead of what the database trusts, trusted less if behind."""
    notes: list[str] = []
    position, _ = live
    if position > facts.position:
        with open_history(history.path, write=True, memory_limit=history.memory_limit) as conn:
            gone = ColumnarHistory(conn, history.path.parent).cut_back(facts.position)
        restored.settle(None)
        notes.append(
            f"The click history here was ahead of the backup (up to click {position}; the restored database "
            f"trusts it up to click {facts.position}): the {gone:,} clicks after that were taken out of it, "
            "and the worker copies the restored database's clicks after it again."
        )
    elif position < facts.position:
        restored.settle(position)
        notes.append(
            f"The click history here is older than the backup (up to click {position}; the restored database "
            f"trusted it up to click {facts.position}): kept, and the worker copies the clicks after it "
            "again from the restored database."
        )
        notes.extend(_lost(restored, facts, position))
    else:
        restored.settle(None)
        notes.append(f"The click history here matches the backup (up to click {position}): kept.")
    return notes


def _lost(restored: Restored, facts: CopyHistory, position: int) -> list[str]:
    """The sentence naming the clicks after `position` only a lost history held (pruned from the backup)."""
    lost = restored.pruned_between(position, facts.position)
    if not lost or facts.pruned_before is None:
        return []
    return [
        f"Up to {lost:,} clicks created before {_utc(facts.pruned_before)}, deleted from the backup's "
        "database by retention, were only in a click history that is not here: they are lost."
    ]
