"""Opening the columnar history's DuckDB file (DATA_DIR/history/clicks.duckdb), under its lock files.

DuckDB lets one process open a file read-write, and then no other process may open it at all, even
read-only; many read-only opens may coexist. Reports run in other processes than the appender (the
admin worker, `lanner report`, web workers without an admin pool), so every open goes through
`history.lock` beside the file: the writer takes an exclusive flock, opens read-write, writes, closes;
a reader takes a shared flock, opens read-only, queries, closes. A writer and a reader never meet
inside DuckDB; a reader waits at most one appended chunk.

`append.lock` (exclusive, not waited for) makes one appender at a time: the periodic task, or
`lanner analytics rebuild|verify --repair`. `lanner backup` and `lanner restore` wait for it (with a
deadline) and hold it while they copy: every writer of the file holds it, so the file cannot change.

DuckDB is imported here on first open only. Nothing is ever downloaded: extension autoinstall and
autoload are off (the history needs none beyond the built-in ones).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.errors import LannerError

LOCK_NAME = "history.lock"
APPEND_LOCK_NAME = "append.lock"
THREADS = 2  # The box's cores are the click path's: reports over a compressed column scan are fast with two.


class HistoryUnreadable(LannerError):
    """The history file cannot be opened or read (damaged, or not DuckDB's)."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        super().__init__(
            f"The click history {path} cannot be read ({cause}); `lanner analytics rebuild` makes it again "
            "from the row store."
        )
        self.cause = cause


class HistoryUnwritable(LannerError):
    """The disk refused a write of the history (full): nothing is wrong with the file; try again later."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        super().__init__(f"The click history {path} cannot be written now ({cause}).")
        self.cause = cause


# How DuckDB and the OS say the disk is full: not damage (the file must not be moved aside for it).
DISK_FULL = ("No space left on device", "disk is full", "Disk full")


def _refused(path: Path, error: BaseException) -> LannerError:
    """What a DuckDB error opening or reading the file means: a full disk, or a damaged file."""
    if any(words in str(error) for words in DISK_FULL):
        return HistoryUnwritable(path, error)
    return HistoryUnreadable(path, error)


class HistoryMissing(LannerError):
    """No history file yet (the worker's first append makes it)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"There is no click history at {path} yet: the worker's first append makes it.")


class HistoryBusy(LannerError):
    """Another process is appending to (or rebuilding) the history."""

    def __init__(self) -> None:
        super().__init__("Another process is appending to the click history; try again in a minute.")


LOCK_POLL = 0.05  # Seconds between tries at a lock waited for with a deadline.


class HistoryBehind(LannerError):
    """The history file holds fewer clicks than the row store trusts it with (replaced by an older copy)."""

    def __init__(self, path: Path, held: int, trusted: int, what: str = "clicks") -> None:
        super().__init__(
            f"The click history {path} is behind the row store (it holds {what} up to id {held}, the row "
            f"store trusts it up to {trusted}: replaced or restored); the worker's next append fills it "
            "again."
        )


class HistoryOutOfMemory(LannerError):
    """A query needed more memory than LANNER_HISTORY_MEMORY_LIMIT lets DuckDB use."""

    def __init__(self, memory_limit: str) -> None:
        super().__init__(
            f"The click history needed more than its memory limit ({memory_limit}, "
            "LANNER_HISTORY_MEMORY_LIMIT) for this report."
        )


class HistoryIncomplete(LannerError):
    """The history was made again from a row store `lanner prune` had emptied: it lacks that time."""

    def __init__(self, path: Path, complete_from: str) -> None:
        super().__init__(
            f"The click history {path} was made again after a prune and lacks the clicks before "
            f"{complete_from}, which this report needs."
        )


# What keeps a reader from the history for now: a report reads the row store's clicks instead.
HISTORY_UNAVAILABLE = (
    HistoryMissing,
    HistoryUnreadable,
    HistoryUnwritable,
    HistoryBusy,
    HistoryBehind,
    HistoryOutOfMemory,
    HistoryIncomplete,
)


@contextlib.contextmanager
def _flock(path: Path, mode: int, wait: float | None = None) -> Iterator[None]:
    """`wait`: seconds to wait for the lock before HistoryBusy (None: as long as it takes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, mode if deadline is None else mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is None or time.monotonic() >= deadline:
                    raise HistoryBusy() from None
                time.sleep(LOCK_POLL)
        yield
    finally:
        os.close(fd)  # Closing drops the flock; the kernel drops it too if the process dies.


def appending(path: Path) -> contextlib.AbstractContextManager[None]:
    """The one-appender lock of the history at `path`; HistoryBusy at once if another holds it."""
    return _flock(path.with_name(APPEND_LOCK_NAME), fcntl.LOCK_EX | fcntl.LOCK_NB)


def holding_writers(path: Path, wait: float) -> contextlib.AbstractContextManager[None]:
    """The one-appender lock of the history at `path`, waited for at most `wait` seconds (then
    HistoryBusy): while it is held no process writes the file (appends, retention, rebuild, repair)."""
    return _flock(path.with_name(APPEND_LOCK_NAME), fcntl.LOCK_EX, wait)


def _config(memory_limit: str) -> dict[str, str | bool | int | float | list[str]]:
    """Every connection's: bounded memory and threads, and no extension ever downloaded or loaded."""
    return {
        "memory_limit": memory_limit,
        "threads": THREADS,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }


@contextlib.contextmanager
def open_copy(path: Path, *, memory_limit: str) -> Iterator[Any]:
    """A read-only DuckDB connection to a copy of the history no Lanner process uses (a backup's):
    no lock file is made beside it. HistoryUnreadable if DuckDB cannot open it."""
    import duckdb

    try:
        conn = duckdb.connect(str(path), read_only=True, config=_config(memory_limit))
    except duckdb.Error as error:
        raise HistoryUnreadable(path, error) from error
    try:
        yield conn
    except duckdb.Error as error:
        raise HistoryUnreadable(path, error) from error
    finally:
        conn.close()


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def copy_history(path: Path, target: Path) -> None:
    """Copy the history file (and its WAL, left by a writer that was killed) to `target`, under the
    shared lock: no writer has the file open meanwhile, so the copy is a closed DuckDB file."""
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_SH):
        shutil.copyfile(path, target)
        if _wal(path).exists():
            shutil.copyfile(_wal(path), _wal(target))


def install_history(copy: Path, path: Path, aside_suffix: str) -> Path | None:
    """Put a copy of the history (a backup's) in the place of the live file, under the exclusive lock;
    the live one (if any) is moved aside with `aside_suffix`, never deleted: it may hold clicks no other
    file has. Where the old one went, None if there was none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    incoming = path.with_name(path.name + ".restoring")
    shutil.copyfile(copy, incoming)
    if _wal(copy).exists():
        shutil.copyfile(_wal(copy), _wal(incoming))
    aside = None
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_EX):
        if path.exists():
            aside = path.with_name(f"{path.name}.{aside_suffix}")
            os.replace(path, aside)
            if _wal(path).exists():
                os.replace(_wal(path), _wal(aside))
        _wal(path).unlink(missing_ok=True)
        if _wal(incoming).exists():
            os.replace(_wal(incoming), _wal(path))
        os.replace(incoming, path)
    return aside


@contextlib.contextmanager
def transaction(conn: Any) -> Iterator[None]:
    """BEGIN … COMMIT on a DuckDB connection; ROLLBACK on any error, which goes on up."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (a full disk) has ended the transaction already: raise its error.
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def open_history(path: Path, *, write: bool, memory_limit: str, wait: float | None = None) -> Iterator[Any]:
    """A DuckDB connection to the history file, closed (and its lock dropped) on leaving: read-write
    under the exclusive lock (the file is made if missing), else read-only under the shared one
    (HistoryMissing if there is no file). HistoryUnreadable if DuckDB cannot open it; HistoryBusy if
    the lock is not had within `wait` seconds (None: waited for)."""
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_EX if write else fcntl.LOCK_SH, wait):
        if not write and not path.exists():
            raise HistoryMissing(path)
        import duckdb

        try:
            conn = duckdb.connect(str(path), read_only=not write, config=_config(memory_limit))
        except duckdb.Error as error:
            if "lock" in str(error).lower():  # Opened outside this protocol (a DuckDB shell): not damage.
                raise HistoryBusy() from error
            raise _refused(path, error) from error
        damage = (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException)
        try:
            yield conn
        except duckdb.Error as error:
            if any(words in str(error) for words in DISK_FULL):  # A failed commit's: TransactionException.
                raise HistoryUnwritable(path, error) from error
            if isinstance(error, damage):
                raise HistoryUnreadable(path, error) from error  # What a damaged file reads as.
            if isinstance(error, duckdb.OutOfMemoryException):
                raise HistoryOutOfMemory(memory_limit) from error
            raise
        finally:
            conn.close()


def replace_history(fresh: Path, path: Path) -> None:
    """Put a rebuilt history file in the place of the live one, atomically, under the exclusive lock
    (no reader has either open meanwhile)."""
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_EX):
        path.with_name(path.name + ".wal").unlink(missing_ok=True)  # The old file's, if it left one.
        os.replace(fresh, path)


def move_aside(path: Path, suffix: str) -> Path | None:
    """Rename a damaged history file out of the way (kept for a look), under the exclusive lock;
    where it went, None if there was none."""
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_EX):
        if not path.exists():
            return None
        aside = path.with_name(f"{path.name}.{suffix}")
        os.replace(path, aside)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            os.replace(wal, aside.with_name(aside.name + ".wal"))
        return aside


def remove_history(path: Path) -> None:
    """Delete a history file and its WAL (a rebuild's leftover), under the exclusive lock."""
    with _flock(path.with_name(LOCK_NAME), fcntl.LOCK_EX):
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".wal").unlink(missing_ok=True)
