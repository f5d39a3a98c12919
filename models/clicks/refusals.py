"""Clicks refused because the spool could not be written (a full disk), and their count.

A click is answered with a subid only once its line is in the journal; when the append fails the
click is refused (routes/click.py answers `LANNER_SPOOL_FULL_ANSWER`) and counted here, for
`lanner status`.

Where the count lives: in `spool/refused.count`, 16 bytes (the count, the last refusal's unix ms)
that every web worker allocates when it starts. Overwriting bytes a file already has needs no free
space (ext4, xfs, tmpfs), so the count keeps up during the outage, `lanner status` reads it with no
message to any process, and it survives restarts. On a copy-on-write file system (btrfs, ZFS) the
overwrite may fail too: the worker then keeps the count in memory and adds it at its next
successful write, so the file shows at least the number refused. A flock on the file keeps each
worker's read-add-write whole.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

REFUSED_FILE = "refused.count"
_RECORD = struct.Struct("<QQ")  # count, last refused at (unix ms)


class SpoolUnwritable(Exception):
    """The click's journal line could not be written; the click has no subid and is not stored."""


class RefusedClicks:
    """One web worker's handle on the refusal count."""

    def __init__(self, spool_dir: Path) -> None:
        self.path = spool_dir / REFUSED_FILE
        self.unsaved = 0  # Refused here but not yet in the file (it could not be written).
        self._fd = -1
        self._open()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open(self) -> bool:
        """Open the file, allocating its 16 bytes if they are not there yet; False if it cannot be."""
        if self._fd >= 0:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size < _RECORD.size:
                os.pwrite(fd, _RECORD.pack(0, 0), 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def add(self, now_ms: int) -> None:
        """Count one refused click; never raises (the visitor's answer must not depend on it)."""
        self.unsaved += 1
        if not self._open():
            return
        fd = self._fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                count, _ = _RECORD.unpack(os.pread(fd, _RECORD.size, 0))
                os.pwrite(fd, _RECORD.pack(count + self.unsaved, now_ms), 0)
                self.unsaved = 0
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except (OSError, struct.error):
            pass  # Kept in `unsaved` for the next refusal.


def read_refused(spool_dir: Path) -> tuple[int, int]:
    """(clicks refused so far, unix ms of the last refusal); (0, 0) if none ever was."""
    try:
        data = (spool_dir / REFUSED_FILE).read_bytes()
    except FileNotFoundError:
        return 0, 0
    if len(data) < _RECORD.size:
        return 0, 0
    return _RECORD.unpack(data[: _RECORD.size])
