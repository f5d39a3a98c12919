"""The idle flusher's wait: asleep until a web worker appends to the spool, or its stop (issue 33).

The flusher does not own the journal (the web workers, other processes, append to it), so nothing in
its process knows a click arrived. An inotify watch on the spool directory does: an append is an
IN_MODIFY of a segment, a new segment an IN_CREATE. The watch is only there while the flusher is
idle: armed when a round lands nothing (before the next round looks, so a click appended between
that look and the wait still wakes it) and removed once a round lands clicks, so under load a
click's write pays no inotify event. A pipe wakes the wait at `stop()`.

Without inotify (another OS, or the instance limit reached) the wait is a plain timed one and the
flusher keeps its short idle pauses.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
from pathlib import Path

logger = logging.getLogger(__name__)

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
WATCHED = IN_MODIFY | IN_CREATE | IN_MOVED_TO
READ_BYTES = 4096


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


class SpoolWake:
    """A wait on `spool_dir` that ends at the first write into it (once armed) or at `wake()`."""

    def __init__(self, spool_dir: Path) -> None:
        self.spool_dir = spool_dir
        self._libc = _libc()
        self._fd = -1
        self._watch = -1
        if self._libc is not None and hasattr(self._libc, "inotify_init1"):
            fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
            else:
                logger.info(
                    "no inotify for the spool (%s): the idle flusher looks every few seconds",
                    os.strerror(ctypes.get_errno()),
                )
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @property
    def is_available(self) -> bool:
        return self._fd >= 0

    @property
    def is_armed(self) -> bool:
        return self._watch >= 0

    def arm(self) -> bool:
        """Watch the spool directory from now on; False when it cannot be watched."""
        if self._watch >= 0:
            return True
        if self._fd < 0:
            return False
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        watch = self._libc.inotify_add_watch(self._fd, os.fsencode(self.spool_dir), WATCHED)
        if watch < 0:
            logger.info("cannot watch %s (%s)", self.spool_dir, os.strerror(ctypes.get_errno()))
            return False
        self._watch = watch
        return True

    def disarm(self) -> None:
        """Stop watching (under load: no inotify event per appended click) and forget what came."""
        if self._watch >= 0:
            self._libc.inotify_rm_watch(self._fd, self._watch)
            self._watch = -1
        self._drain(self._fd)

    def wait(self, timeout: float) -> bool:
        """Until a write into the spool (armed), `wake()`, or `timeout` seconds; True if woken early."""
        watched = [self._wake_read] + ([self._fd] if self._watch >= 0 else [])
        try:
            ready, _, _ = select.select(watched, [], [], max(0.0, timeout))
        except InterruptedError:  # pragma: no cover - PEP 475 retries select; kept for clarity.
            return True
        for fd in ready:
            self._drain(fd)
        return bool(ready)

    def wake(self) -> None:
        """End a wait now (from another thread): the flusher is stopping."""
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass  # The pipe is full of wakes already, or the flusher has closed it: it has stopped.

    def close(self) -> None:
        for fd in (self._fd, self._wake_read, self._wake_write):
            if fd >= 0:
                os.close(fd)
        self._fd = self._wake_read = self._wake_write = self._watch = -1

    @staticmethod
    def _drain(fd: int) -> None:
        if fd < 0:
            return
        while True:
            try:
                if not os.read(fd, READ_BYTES):
                    return
            except BlockingIOError:
                return
            except OSError as exc:  # pragma: no cover - a closed descriptor at stop.
                if exc.errno != errno.EBADF:
                    raise
                return
