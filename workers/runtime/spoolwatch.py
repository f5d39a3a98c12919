"""The spool as `/readyz`, `/healthz`, `/metrics` and `lanner status` see it: can this node journal
clicks, and how many wait to land, since when.

Writable: the spool's file system has room (statvfs, no descriptor) and no click found the journal
unwritable in the last REFUSAL_WINDOW seconds. A node that cannot journal refuses every click
(routes/click.py): only then is it not ready. A database or Redis outage never makes it so.

The backlog counts from the landed position: the database's, or while the database does not answer
(cluster mode's PostgreSQL away), the one the flusher last wrote in its heartbeat, which is at most a
second or two behind the database's: the count may then include clicks landed just before the outage,
never leave one out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peewee import Database

from models.clicks.backlog import SpoolBacklog, backlog_age_from
from models.clicks.spool import read_position
from models.store.database import STORE_ERRORS
from workers.runtime.heartbeat import HeartbeatReader, beat_position, heartbeat_path

# Below this much free space on the spool's file system the node is not ready: a click line is ~300
# bytes, and a new segment file needs a few blocks.
MIN_FREE_BYTES = 1 << 20
REFUSAL_WINDOW = 10.0  # Seconds a refused click keeps the node not ready (unless one lands after it).


class SpoolWatch:
    """One process's look at its node's spool (keeps its counting and its heartbeat descriptor)."""

    def __init__(
        self,
        spool_dir: Path,
        data_dir: Path,
        *,
        min_free_bytes: int = MIN_FREE_BYTES,
        clock: Callable[[], float] = time.time,
        statvfs: Callable[[Path], Any] = os.statvfs,
    ) -> None:
        self.spool_dir = spool_dir
        self.backlog = SpoolBacklog(spool_dir)
        self.beats = HeartbeatReader(heartbeat_path(data_dir))
        self.min_free_bytes = min_free_bytes
        self.clock = clock
        self.statvfs = statvfs

    def writable(self, refused_at: float = 0.0) -> tuple[bool, str]:
        """(whether a click can be journaled now, why not in one sentence)."""
        try:
            found = self.statvfs(self.spool_dir)
        except OSError as exc:
            return False, f"the spool {self.spool_dir} cannot be looked at: {exc.strerror or exc}"
        free = found.f_bavail * found.f_frsize
        if free < self.min_free_bytes:
            return False, f"the spool's file system has {free} bytes free"
        ago = self.clock() - refused_at
        if refused_at and ago < REFUSAL_WINDOW:
            return False, f"a click found the spool unwritable {ago:.0f} s ago"
        return True, ""

    def landed(self, db: Database | None) -> tuple[tuple[int, int] | None, str]:
        """(the landed position, where it comes from: "database" or "flusher heartbeat"); the database
        is not asked when `db` is None (it was just found not to answer)."""
        if db is not None:
            try:
                return read_position(db, self.spool_dir), "database"
            except STORE_ERRORS:
                pass
        return beat_position(self.beats.read()), "flusher heartbeat"

    def heartbeat_lag(self, now: float) -> float | None:
        """The backlog's age from the flusher's last heartbeat (None if it never said where it was):
        ConsumerWatch's `outage_lag`. Raises OSError (EMFILE) as the heartbeat's and a segment's reads do."""
        landed = beat_position(self.beats.read())
        return None if landed is None else backlog_age_from(self.spool_dir, landed, now)

    def status(self, db: Database | None, refused_at: float = 0.0) -> dict[str, Any]:
        """The spool's entry of a dependency view: state (up: clicks can be journaled), why not, and
        the backlog (pending_clicks, pending_bytes, oldest_s), None where it cannot be counted."""
        is_writable, reason = self.writable(refused_at)
        shown: dict[str, Any] = {"state": "up" if is_writable else "down"}
        if reason:
            shown["error"] = reason
        try:
            landed, source = self.landed(db)
            if landed is None:
                shown.update(pending_clicks=None, pending_bytes=None, oldest_s=None)
                shown["note"] = "no landed position known: the database does not answer and no flusher said"
                return shown
            backlog = self.backlog.measure(landed, self.clock())
        except OSError as exc:  # EMFILE near the open-file limit: the numbers, not the state, are unknown.
            shown.update(pending_clicks=None, pending_bytes=None, oldest_s=None)
            shown["note"] = f"the backlog cannot be counted from this process: {exc.strerror or exc}"
            return shown
        oldest = None if backlog.oldest_s is None else round(backlog.oldest_s, 1)
        shown.update(
            pending_clicks=backlog.clicks, pending_bytes=backlog.bytes, oldest_s=oldest, counted_from=source
        )
        return shown

    def close(self) -> None:
        self.beats.close()
