"""How far behind the spool flusher is: the age of the oldest click that is not in the database yet,
and how many clicks wait (SpoolBacklog).

Read from the journal itself (the line at the flusher's position), so it is right whether the
flusher is slow, stuck or gone, and costs one small read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from peewee import Database

from models.clicks.record import is_lp_line, peek_line
from models.clicks.spool import list_segments, read_position, segment_path

HEAD_BYTES = 4096  # Enough for a line's head (ip, ua_hash, created_at).


def backlog_age(db: Database, spool_dir: Path, now: float) -> float | None:
    """Seconds since the oldest click not in the database was made: 0.0 when none waits, None when
    the line waiting first does not parse (the flusher moves such a line aside)."""
    return backlog_age_from(spool_dir, read_position(db, spool_dir), now)


def backlog_age_from(spool_dir: Path, landed: tuple[int, int], now: float) -> float | None:
    """backlog_age past a landed position known otherwise (the flusher's heartbeat, in an outage)."""
    segment, offset = landed
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


READ_BYTES = 1 << 20  # Read at a time while counting lines.


@dataclass(frozen=True, slots=True)
class Backlog:
    clicks: int  # Complete journal lines past the landed position (LP clicks are lines too).
    bytes: int
    oldest_s: float | None  # backlog_age's answer.


class SpoolBacklog:
    """How many clicks wait in the journal past a landed position, counted as the journal grows.

    A health check or a scrape asks every few seconds, and in a database outage the journal grows by
    ~1 MB every 3 s at 1,000 clicks/s: counting it all each time would read it all each time. This
    remembers how far it has counted and how many lines lie between the landed position and there, so
    each look reads only the lines appended since the last one, and those landed since (to take them
    off). Opens each segment it reads (raises OSError: EMFILE near the open-file limit).
    """

    def __init__(self, spool_dir: Path) -> None:
        self.spool_dir = spool_dir
        self.base: tuple[int, int] | None = None  # The landed position counted from...
        self.end = (0, 0)  # ...up to here (just past a newline)...
        self.lines = 0  # ...holding this many lines.

    def measure(self, landed: tuple[int, int], now: float) -> Backlog:
        segments = list_segments(self.spool_dir) if self.spool_dir.exists() else []
        landed_lines = None
        if self.base is not None and self.base < landed <= self.end:
            landed_lines = self._count(self.base, landed, segments)
        if landed_lines is not None:
            self.lines -= landed_lines
            self.base = landed
        elif landed != self.base:
            # Start again from the landed position: the first look, a reset spool, or lines that landed
            # past what was counted or in a segment removed since (then they cannot be taken off).
            self.base, self.end, self.lines = landed, landed, 0
        for number in segments:
            if number < self.end[0]:
                continue
            start = self.end[1] if number == self.end[0] else 0
            lines, end = _count_from(segment_path(self.spool_dir, number), start, None)
            if end is None:
                continue  # Gone (landed and removed since it was listed).
            self.lines += lines
            self.end = (number, end)
        pending = 0
        for number in segments:
            if number >= landed[0]:
                try:
                    size = os.stat(segment_path(self.spool_dir, number)).st_size
                except FileNotFoundError:
                    continue
                pending += max(0, size - (landed[1] if number == landed[0] else 0))
        return Backlog(self.lines, pending, backlog_age_from(self.spool_dir, landed, now))

    def _count(self, start: tuple[int, int], stop: tuple[int, int], segments: list[int]) -> int | None:
        """Lines from `start` up to `stop` (both counted positions); None when a segment between them
        is gone (the flusher removes landed ones)."""
        total = 0
        present = set(segments)
        for number in range(start[0], stop[0] + 1):
            if stop == (number, 0):
                break  # Nothing of the last segment is wanted (it may not exist yet).
            if number not in present:
                return None
            lines, end = _count_from(
                segment_path(self.spool_dir, number),
                start[1] if number == start[0] else 0,
                stop[1] if number == stop[0] else None,
            )
            if end is None:
                return None
            total += lines
        return total


def _count_from(path: Path, offset: int, stop: int | None) -> tuple[int, int | None]:
    """(newlines from `offset` up to `stop` or the end, the offset just past the last one counted);
    (0, None) when the file is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0, None
    lines, end = 0, offset
    try:
        while stop is None or offset < stop:
            size = READ_BYTES if stop is None else min(READ_BYTES, stop - offset)
            chunk = os.pread(fd, size, offset)
            if not chunk:
                break
            count = chunk.count(b"\n")
            if count:
                lines += count
                end = offset + chunk.rfind(b"\n") + 1
            offset += len(chunk)
    finally:
        os.close(fd)
    return lines, end
