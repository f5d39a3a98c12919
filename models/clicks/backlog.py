"""How far behind the spool flusher is: the age of the oldest click that is not in the database yet.

Read from the journal itself (the line at the flusher's position), so it is right whether the
flusher is slow, stuck or gone, and costs one small read.
"""

from __future__ import annotations

import os
from pathlib import Path

from peewee import Database

from models.clicks.record import is_lp_line, peek_line
from models.clicks.spool import list_segments, read_position, segment_path

HEAD_BYTES = 4096  # Enough for a line's head (ip, ua_hash, created_at).


def backlog_age(db: Database, spool_dir: Path, now: float) -> float | None:
    """Seconds since the oldest click not in the database was made: 0.0 when none waits, None when
    the line waiting first does not parse (the flusher moves such a line aside)."""
    segment, offset = read_position(db, spool_dir)
    head = _read_head(segment_path(spool_dir, segment), offset)
    if not head and spool_dir.exists():
        # The current segment may be sealed and drained, with the clicks already in the next ones.
        for number in list_segments(spool_dir):
            if number > segment:
                head = _read_head(segment_path(spool_dir, number), 0)
                if head:
                    break
    return head_age(head, now)


def head_age(head: bytes, now: float) -> float | None:
    """The age of the line `head` starts (0.0 for none, None when it does not parse)."""
    if not head:
        return 0.0
    try:
        if is_lp_line(head):  # An LP click's line: its clicked_at, third too.
            created_at = int(head.split(b"\t", 3)[2])
        else:
            created_at = peek_line(head)[2]
    except ValueError:
        return None
    return max(0.0, now - created_at / 1000)


def _read_head(path: Path, offset: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        return os.pread(fd, HEAD_BYTES, offset)
    finally:
        os.close(fd)
