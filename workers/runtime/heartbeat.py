"""The spool flusher's heartbeat, and how `lanner status` and `/healthz` judge the consumer by it.

`lanner worker` writes `DATA_DIR/flusher.heartbeat` while its flusher runs: its pid and start time
(so a reused pid is not mistaken for it), when it last tried to flush and when a flush last moved
the journal on. "Last landed" alone cannot tell an idle tracker from a dead flusher; the attempt
time can. The file is overwritten in place at most once a second (256 bytes, never a new block:
once it exists, a full disk does not stop it), and a write that fails is skipped.

A web worker's `/healthz` judges the consumer through a ConsumerWatch: the heartbeat read on a
descriptor it keeps and the backlog on the journal's, so near the open-file limit (EMFILE) the
check needs no new descriptor; what still cannot be read is answered from the last look (at most
STALE_AFTER old), so one EMFILE never turns a worker that takes clicks unhealthy.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peewee import Database

from models.clicks.backlog import backlog_age
from models.store.database import STORE_ERRORS
from workers.runtime.procfs import is_alive, process_start_time

logger = logging.getLogger(__name__)

HEARTBEAT_BYTES = 256
WRITE_EVERY = 1.0  # Seconds between writes of the heartbeat file.
# A flusher that has not tried to flush for this long is stuck (it looks every 5 s when idle:
# workers/runtime/tasks.py IDLE_WAIT).
STALE_AFTER = 30.0


def heartbeat_path(data_dir: Path) -> Path:
    return data_dir / "flusher.heartbeat"


class Heartbeat:
    """The flusher's side: call `attempt()` as a round starts and pass `on_batch` to flush_spool."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self.pid = os.getpid()
        self.start = process_start_time(self.pid)
        self.attempt_at: float | None = None
        self.landed_at: float | None = None
        self.position: tuple[int, int] | None = None  # Landed up to (FlushResult.position).
        self._moved = 0  # Lines the current round has moved past so far.
        self._written_at = 0.0
        self._next_failure_log = 0.0

    def attempt(self) -> None:
        self.attempt_at = self.clock()
        self._moved = 0
        self._write()

    def on_batch(self, result) -> None:
        """flush_spool's progress callback (a FlushResult so far in this round)."""
        moved = result.inserted + result.duplicates + result.rejected
        position = getattr(result, "position", None)
        if position is not None:
            self.position = position
        if moved > self._moved:
            self._moved = moved
            self.landed_at = self.clock()
        self._write()

    def _write(self) -> None:
        now = self.clock()
        if now - self._written_at < WRITE_EVERY:
            return
        self._written_at = now
        beat = {
            "pid": self.pid,
            "start": self.start,
            "beat_at": now,
            "attempt_at": self.attempt_at,
            "landed_at": self.landed_at,
            "position": self.position,
        }
        data = json.dumps(beat).encode().ljust(HEARTBEAT_BYTES - 1) + b"\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, data, 0)
            finally:
                os.close(fd)
        except OSError as exc:
            if now >= self._next_failure_log:
                self._next_failure_log = now + 60
                logger.warning("cannot write the flusher heartbeat %s: %s", self.path, exc)


def read_heartbeat(path: Path) -> dict[str, Any] | None:
    """The last heartbeat written, or None if there is none (or it cannot be read)."""
    for _ in range(2):  # A read racing the in-place write may see half of each: read again.
        try:
            text = path.read_bytes()
        except OSError:
            return None
        beat = _parse_beat(text)
        if beat is not None:
            return beat
    return None


def _parse_beat(text: bytes) -> dict[str, Any] | None:
    try:
        beat = json.loads(text)
    except ValueError:
        return None
    return beat if isinstance(beat, dict) and isinstance(beat.get("pid"), int) else None


class HeartbeatReader:
    """The heartbeat file read on a descriptor kept open: the flusher overwrites it in place, so one
    stat (no descriptor) says whether it is still the file at the path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._identity: tuple[int, int] | None = None

    def read(self) -> dict[str, Any] | None:
        """The last heartbeat written, or None if there is none. Raises OSError when the file has to
        be opened and cannot be (EMFILE)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.close()
            return None
        if self._fd < 0 or (stat.st_dev, stat.st_ino) != self._identity:
            fd = os.open(self.path, os.O_RDONLY)
            self.close()
            self._fd, self._identity = fd, (stat.st_dev, stat.st_ino)
        for _ in range(2):  # A read racing the in-place write may see half of each: read again.
            beat = _parse_beat(os.pread(self._fd, HEARTBEAT_BYTES, 0))
            if beat is not None:
                return beat
        return None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._identity = -1, None


def is_running(pid: int, start: int | None) -> bool:
    """The process that wrote a heartbeat still runs (same pid and start time)."""
    if start is not None:
        return process_start_time(pid) == start
    return is_alive(pid)


def _ago(now: float, then: float | None) -> float | None:
    return None if then is None else round(max(0.0, now - then), 1)


def consumer_status(
    data_dir: Path, db: Database, spool_dir: Path, *, backlog_alert_seconds: float, now: float | None = None
) -> dict[str, Any]:
    """The consumer as `lanner status` and `/healthz` show it; `problems` is empty when all is well.

    state: ok, stale (runs, but its flusher has not tried for STALE_AFTER s), dead (its process is
    gone) or missing (no heartbeat: `lanner worker` never ran here). lag_s: the age of the oldest
    click not in the database (0 when none waits; None when its line does not parse).
    """
    now = time.time() if now is None else now
    beat = read_heartbeat(heartbeat_path(data_dir))
    lag = backlog_age(db, spool_dir, now)
    alive = beat is not None and is_running(beat["pid"], beat.get("start"))
    return judge_consumer(beat, alive, lag, now, backlog_alert_seconds)


def judge_consumer(
    beat: dict[str, Any] | None, alive: bool, lag: float | None, now: float, backlog_alert_seconds: float
) -> dict[str, Any]:
    """consumer_status from what was read: the heartbeat, whether its process runs, the backlog's age."""
    status: dict[str, Any] = {"state": "missing", "pid": None, "alive": False}
    problems = []
    if beat is None:
        problems.append("no flusher heartbeat: is `lanner worker` running?")
    else:
        pid = beat["pid"]
        heartbeat_ago = _ago(now, beat.get("beat_at"))
        status.update(
            pid=pid,
            alive=alive,
            heartbeat_s_ago=heartbeat_ago,
            last_attempt_s_ago=_ago(now, beat.get("attempt_at")),
            last_landed_s_ago=_ago(now, beat.get("landed_at")),
        )
        if not status["alive"]:
            status["state"] = "dead"
            problems.append(f"the consumer (pid {pid}) is not running: nothing lands in the database")
        elif heartbeat_ago is None or heartbeat_ago > STALE_AFTER:
            status["state"] = "stale"
            problems.append(f"the consumer (pid {pid}) runs, but its flusher is stuck ({heartbeat_ago} s)")
        else:
            status["state"] = "ok"
    status["lag_s"] = None if lag is None else round(lag, 1)
    if lag is not None and lag > backlog_alert_seconds:
        problems.append(f"the oldest click not in the database yet is {lag:.0f} s old")
    status["problems"] = problems
    return status


class ConsumerWatch:
    """consumer_status as a web worker's `/healthz` asks it, with no new file descriptor per request.

    The heartbeat is read on a descriptor kept open (HeartbeatReader), the backlog by `lag` (the
    tracker's, on the journal's descriptors), and a process whose /proc entry cannot be opened is
    asked with signal 0. A look that still fails (EMFILE: the worker's connections hold every
    descriptor) is answered from the last look while it is at most `keep_seconds` old, marked with
    `checked_s_ago`: a load balancer that polls a worker taking clicks must not see it flap. Failing
    longer, the answer says the consumer cannot be checked (a problem: `?strict=1` answers 503).

    While the database does not answer, `lag` cannot read the landed position: `outage_lag` (the
    backlog's age from the flusher's last heartbeat, workers/runtime/spoolwatch.py) stands in, so the
    consumer is still judged by its heartbeat; without one the store's error is raised.
    """

    def __init__(
        self,
        data_dir: Path,
        lag: Callable[[float], float | None],
        *,
        backlog_alert_seconds: float,
        keep_seconds: float = STALE_AFTER,
        clock: Callable[[], float] = time.time,
        outage_lag: Callable[[float], float | None] | None = None,
    ) -> None:
        self.beats = HeartbeatReader(heartbeat_path(data_dir))
        self.lag = lag
        self.outage_lag = outage_lag
        self.backlog_alert_seconds = backlog_alert_seconds
        self.keep_seconds = keep_seconds
        self.clock = clock
        self._last: dict[str, Any] | None = None
        self._last_at = 0.0
        self._next_failure_log = 0.0

    def __call__(self) -> dict[str, Any]:
        now = self.clock()
        try:
            beat = self.beats.read()
            alive = beat is not None and self._is_running(beat)
            try:
                lag = self.lag(now)
            except STORE_ERRORS:
                if self.outage_lag is None:
                    raise
                lag = self.outage_lag(now)
        except OSError as exc:
            return self._unchecked(now, exc)
        self._last, self._last_at = judge_consumer(beat, alive, lag, now, self.backlog_alert_seconds), now
        return self._last

    @staticmethod
    def _is_running(beat: dict[str, Any]) -> bool:
        try:
            return is_running(beat["pid"], beat.get("start"))
        except OSError:  # /proc/<pid>/stat cannot be opened (EMFILE): signal 0 needs no descriptor.
            return is_alive(beat["pid"])

    def _unchecked(self, now: float, exc: OSError) -> dict[str, Any]:
        reason = exc.strerror or str(exc)
        if now >= self._next_failure_log:
            self._next_failure_log = now + 60
            logger.warning("/healthz cannot look at the consumer (%s); answering from its last look", reason)
        if self._last is not None and now - self._last_at <= self.keep_seconds:
            return {**self._last, "checked_s_ago": round(now - self._last_at, 1)}
        return {
            "state": "unknown",
            "pid": None,
            "alive": None,
            "lag_s": None,
            "problems": [f"the consumer cannot be checked from this worker: {reason}"],
        }


def beat_position(beat: dict[str, Any] | None) -> tuple[int, int] | None:
    """Where the flusher had landed up to when it last wrote its heartbeat (None if it never said)."""
    position = None if beat is None else beat.get("position")
    if isinstance(position, list) and len(position) == 2 and all(isinstance(n, int) for n in position):
        return (position[0], position[1])
    return None
