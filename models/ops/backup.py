"""Online backup and restore of the database file: `lanner backup` and `lanner restore`.

A backup is taken with SQLite's online backup API in one step: a consistent snapshot while the
tracker keeps serving (in WAL mode the copy's read transaction blocks no writer). Clicks still in
the spool at that moment are not in it; they land in the live database as usual.

A restore replaces the database file while nothing has it open, and moves the spool aside: its
journal belongs to the database being replaced, and its position would not match the restored one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from models.errors import LannerError
from models.store.files import FILE_ERRORS, check_lanner_file, copy_database, start_spool_after


class BackupError(LannerError, RuntimeError):
    """A backup or restore that cannot be done; the message is one sentence for the user."""


def backup_database(database_path: Path, target: Path) -> int:
    """Copy the live database to `target` (which must not exist); return its size in bytes."""
    if target.exists():
        raise BackupError(f"{target} already exists; choose a new file name.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    if not database_path.is_file():
        raise BackupError(f"There is no database at {database_path}.")
    copy_database(database_path, partial)
    os.replace(partial, target)
    return target.stat().st_size


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


def restore_database(backup: Path, database_path: Path, spool_dir: Path) -> Path | None:
    """Replace the database with `backup`; return where the old spool was moved (if any)."""
    if not backup.is_file():
        raise BackupError(f"There is no backup file {backup}.")
    try:
        verdict = check_lanner_file(backup)
    except FILE_ERRORS as exc:
        raise BackupError(f"{backup} is not a Lanner database ({exc}).") from None
    if verdict != "ok":
        raise BackupError(f"{backup} is damaged: {verdict}.")
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
    for suffix in ("-wal", "-shm"):
        database_path.with_name(database_path.name + suffix).unlink(missing_ok=True)
    os.replace(incoming, database_path)
    return moved
