"""The click spool: an append-only journal every web worker writes and the flusher lands in SQLite.

Why a journal first: a click must be durable before its 302 leaves, and a held SQLite write lock
must never make the redirect wait. Appending one line to a file under a short `flock` costs a few
µs and survives a process crash (the kernel has it); the Huey consumer then inserts the lines in
batches (one transaction per batch, ~17 µs per row instead of ~230 µs per autocommit INSERT).

Layout under `<data_dir>/spool/`:
- `clicks.<segment>.log`: tab-separated lines (models/clicks/record.py). A segment is sealed once it reaches
  `segment_bytes`; the next append goes to `<segment + 1>`. Writers switch segments only while
  holding the lock, so every worker agrees on where the next line goes. A segment left behind has
  its write bits cleared (Journal._mark_left): a worker that cannot tell by its size (a segment cut
  short by hand) sees it in the stat it makes under the lock before each append, and follows.
- `journal.lock`: the `flock` that serialises appends. Holding it, a worker first reads the lines
  other workers appended since its last look (`on_line`), so debounce and uniqueness see clicks
  that are not flushed yet, then appends its own line.
- `rejected.log`: lines the flusher could not parse (a torn write after a power cut) or that hold a
  value no click has (a number out of range: corruption), kept for inspection instead of blocking
  the spool; `lanner spool status` counts them.
- `missing.log`: segments deleted (or moved away) by hand before they landed, one line each,
  written by the worker or flusher that found the gap; `lanner spool status` reports the ones
  whose clicks are lost and exits non-zero until the file is removed. Writers notice their
  segment is gone under the lock; while a worker (or the flusher, which holds every unlanded
  segment open) still has the file open, its unlanded part is put back at its path
  (`restore_segment`, noted with 0 lost), else writers move on to a new segment, so no click is
  appended to a file nobody will read. A segment replaced at its path (by hand, or made anew by a
  worker that opened its journal after the deletion) is left, and the old file's unlanded lines are
  moved to the new segment by the first worker that finds it.
- `damaged.log`: segments found cut short (by hand: `truncate`, `> file`, a restore) or ending in a
  torn line (a power cut mid-write), one line each, by whichever process finds it first: the web
  worker about to append (its segment ends mid-line, or before a position read in it or landed)
  or starting, the flusher (its position past the end or not at a line start, a held segment
  shrunk, a torn last line, which goes to rejected.log). The segment is left for a new one, never
  appended to: a torn tail would swallow the next click's line, and lines written below a
  position already read would never land. `lanner spool status` reports it (and any it sees
  itself) and exits non-zero until the file is removed.

Idempotency: the flusher stores its journal position in its node's `spool_node` row
(models/clicks/node.py) in the same transaction as the inserted clicks (and their cap counters and
rollups, models/reporting/rollups.py), and inserts with `ON CONFLICT DO NOTHING` on the unique subid,
so a flush killed at any point and re-run lands every click exactly once. An LP click's line
(models/clicks/record.py) lands on its click with `... WHERE lp_clicked_at IS NULL`: once, however
often it is replayed; its line follows its click's, and a batch lands its clicks before its LP clicks.

fsync policy: workers never fsync (a process crash loses nothing: the data is in the page cache).
The flusher fsyncs the unflushed segments once a second (`SpoolSync`) and deletes sealed segments
only after a checkpoint has made their rows durable, so a power cut costs at most about the last
second of clicks, the same order as SQLite's `synchronous=NORMAL`. (fsync at every flush doubled
the redirect's p95 latency: an ext4 journal commit stalls the workers' appends.) A failed fsync is
never taken back by a later one's success: what it left undurable is written again first (`SpoolSync`).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from peewee import Database

from models.clicks.node import partial_number, spool_node
from models.clicks.record import (
    BROWSER,
    CREATED_AT,
    DEVICE_TYPE,
    IP,
    IS_BOT,
    NOT_CHECKED,
    OFFER_ID,
    OS,
    ROUTE,
    STREAM_ID,
    USER_AGENT,
    decode_lp_line,
    decode_row,
    is_lp_line,
)
from models.errors import LannerError
from models.lookups.bots import BotDetector
from models.lookups.useragent import UNKNOWN_DEVICE, UserAgentParser, device_type
from models.reporting.clickcosts import convert_unrated_costs
from models.reporting.costs import ClickCosts
from models.reporting.currency import report_currency
from models.reporting.rollups import RollupDelta
from models.routing.caps import CounterZones, add_to_counters
from models.routing.path import with_flushed_steps
from models.store.clicks import ClickStore
from models.store.costs import CostStore
from models.store.database import write_tx

logger = logging.getLogger(__name__)

READ_CHUNK = 1 << 20
# Bytes the flusher reads a line it wants to land (a journal line is ~200-600 bytes): a batch short of
# its lines only lands fewer, the next batch reads on.
LINE_GUESS = 1024
# Sealed segments a web worker keeps open until they land (Journal.keep_sealed_safe). Few: an idle
# worker closes them only at its next click, and meanwhile a landed, removed one still takes space.
KEPT_SEALED_SEGMENTS = 2
# How long the flusher waits for a web worker to restore a sealed segment gone from its path that
# the flusher itself never had open, before it reports the segment lost: longer than the workers'
# look at theirs (ClickTracker.refresh, once a second while clicks arrive).
LOST_SEGMENT_GRACE = 3.0


def segment_path(spool_dir: Path, segment: int) -> Path:
    return spool_dir / f"clicks.{segment:08d}.log"


def list_segments(spool_dir: Path) -> list[int]:
    segments = []
    for path in spool_dir.glob("clicks.*.log"):
        number = path.name.split(".")[1]
        if number.isdigit():
            segments.append(int(number))
    return sorted(segments)


REJECTED_FILE = "rejected.log"
MISSING_FILE = "missing.log"
DAMAGED_FILE = "damaged.log"


def read_position(db: Database, spool_dir: Path) -> tuple[int, int]:
    """How far the spool's node has landed (its `spool_node` row, models/clicks/node.py)."""
    return ClickStore(db.connection()).position(spool_node(spool_dir).name)


class SpoolClaimed(LannerError):
    """The node's row in the database belongs to another spool: landing here would skip its lines."""


_claimed: set[tuple[Database, Path]] = set()


def claim_position(db: Database, spool_dir: Path) -> None:
    """Make sure the node's row is this spool's before landing into it (once a process: a row, once
    claimed, stays its spool's)."""
    node = spool_node(spool_dir)
    if not node.spool_id or (db, spool_dir) in _claimed:  # No id: a spool no node has started (`main`).
        return
    with write_tx(db):
        holder = ClickStore(db.connection()).claim(node.name, node.spool_id)
    if holder == node.spool_id:
        _claimed.add((db, spool_dir))
    else:
        raise SpoolClaimed(
            f"The database's node {node.name!r} lands another spool than {spool_dir}: two hosts share "
            f"LANNER_NODE_ID={node.name}. Give each host its own name."
        )


class Journal:
    """One web worker's handle on the shared journal."""

    def __init__(
        self,
        spool_dir: Path,
        segment_bytes: int,
        start: tuple[int, int],
        on_line: Callable[[tuple[int, int], bytes], None],
        flushed: Callable[[], tuple[int, int]],
    ) -> None:
        """Open the journal at the flusher's position `start`, so every unflushed line is replayed.

        `flushed` reads the flusher's position now; asked only when our segment file has gone.
        """
        self.spool_dir = spool_dir
        self.segment_bytes = segment_bytes
        self.on_line = on_line
        self.flushed = flushed
        spool_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(spool_dir / "journal.lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._fd = -1
        self.segment: int  # These four set by _open_segment.
        self.offset: int
        self._identity: tuple[int, int]
        self._is_left: bool  # Its write bits cleared: no writer appends to it any more (_mark_left).
        # The flushed position as last read (ClickTracker.refresh, about once a second): a segment
        # whose file ends before it was cut short, even where our own offset does not show it.
        self._landed = start
        # Sealed segments we left, still open until they land: one deleted by hand meanwhile (the
        # flusher paused or slow, and never saw it) is restored from here (keep_sealed_safe).
        self._sealed: dict[int, tuple[int, tuple[int, int]]] = {}
        self.lock()
        try:
            segment, offset = start
            # The flusher may have moved past `start` and deleted its segment since we read it:
            # start at the first segment still there; never recreate a flushed one.
            later = [number for number in list_segments(spool_dir) if number >= segment]
            if later and later[0] != segment:
                segment, offset = later[0], 0
            elif offset > 0 and not later:
                # The segment the database says we are in is gone (deleted or moved by hand): lines
                # appended to it now would sit before the flushed position and never land.
                logger.error(
                    "spool segment %s is missing, its flushed position %s; appending to segment %s",
                    segment,
                    offset,
                    segment + 1,
                )
                segment, offset = segment + 1, 0
            self._open_segment(segment)
            self.offset = offset
            # A segment shorter than its flushed part (cut short by hand, a restore) or ending in a
            # torn line is found here, noted in damaged.log and left (_look_at_segment, catch_up).
            self.catch_up(is_locked=True)
            # Writers leave a segment early when it is replaced by hand (_leave_lost_segment): the
            # one they append to is the newest.
            while later := [number for number in list_segments(spool_dir) if number > self.segment]:
                self._open_segment(later[0], keep_sealed=True)
                self.catch_up(is_locked=True)
        finally:
            self.unlock()

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd, *(fd for fd, _ in self._sealed.values())):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1
        self._sealed.clear()

    def _open_segment(self, segment: int, *, keep_sealed: bool = False) -> None:
        path = segment_path(self.spool_dir, segment)
        # Opened before the old one is closed: creating it fails on a full disk, and the journal
        # must then stay on a segment it can read, not on a closed (later reused) descriptor.
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except PermissionError:  # Left (read-only, _mark_left): only read, never appended to.
            fd = os.open(path, os.O_RDONLY)
        if self._fd >= 0:
            if segment != self.segment:
                self._mark_left()  # Only ever for a segment every writer is leaving (see catch_up).
            if keep_sealed and self.offset >= self.segment_bytes:
                self._sealed[self.segment] = (self._fd, self._identity)
                if len(self._sealed) > KEPT_SEALED_SEGMENTS:
                    os.close(self._sealed.pop(min(self._sealed))[0])
            else:
                os.close(self._fd)
        self._fd = fd
        self.segment, self.offset = segment, 0
        self._path = os.fspath(path)
        stat = os.fstat(self._fd)
        self._identity = (stat.st_dev, stat.st_ino)
        self._is_left = not stat.st_mode & 0o200

    def _mark_left(self) -> None:
        """Clear our segment's write bits as we leave it, so that every writer leaves it too.

        A writer knows a segment is sealed by reading it to segment_bytes; one cut short by hand
        (or found damaged) may never get there, and a worker that read it only up to the cut
        would go on appending to it after the others moved on, past where the flusher looks.
        Each writer stats its segment under the lock before it appends (_look_at_segment): a
        segment without write bits is one to leave. Sealed segments are marked too, as they are
        left: cut short later, they are still left."""
        if self._is_left:
            return
        self._is_left = True
        try:
            mark_left(self._fd)
        except OSError as exc:  # Another user's file: the log says why the others may not follow.
            logger.warning("could not mark spool segment %s read-only as it is left: %s", self.segment, exc)

    def lock(self) -> None:
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def unlock(self) -> None:
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def catch_up(self, *, is_locked: bool) -> None:
        """Feed every complete line appended since our last look to `on_line`.

        PERF: call it once without the lock (the bulk of other workers' lines, while they keep
        appending) and once holding it (the last few), so the lock is held for microseconds.
        Holding it, one stat() (~1 µs) checks that our segment is still the file at its path, as
        long as we have read it, and not left by another writer (_look_at_segment).

        Holding it, a segment found damaged is left for a new one, never appended to: one that
        ends in a torn line (cut short mid-line by hand, or a power cut mid-write; our line would
        be glued to it and refused with it) or that is shorter than a position already read in it
        (cut short by hand: lines appended now would sit before the flushed position and never
        land). It is noted in damaged.log, so `lanner spool status` reports it until acknowledged.
        """
        # PERF: holding the lock nobody appends, so the stat's size says whether there is anything to
        # read; most clicks find nothing new there, and skip the pread.
        size = self._look_at_segment() if is_locked else None
        while True:
            torn_at = None if size == self.offset else self._read_to_end(is_locked)
            size = None  # A segment opened below is read as it is found.
            if is_locked:
                landed_segment, landed = self._landed
                if torn_at is not None:
                    self._damaged(torn_at, f"ends in a torn line at byte {torn_at}")
                elif landed_segment == self.segment and landed > self.offset:
                    self._damaged(
                        self.offset, f"was cut to {self.offset} bytes, below its landed position {landed}"
                    )
            if self.offset < self.segment_bytes and not self._is_left:
                return
            # Sealed: nobody appends to a segment once it holds segment_bytes (see module doc), or
            # left by a writer that found it damaged. A worker idle for a while may find the next
            # ones landed and deleted already: go to the first one still there, never recreate one
            # the flusher has passed.
            later = [number for number in list_segments(self.spool_dir) if number > self.segment]
            self._open_segment(later[0] if later else self.segment + 1, keep_sealed=True)

    def _look_at_segment(self) -> int | None:
        """Holding the lock, one stat(): our segment is still the file at its path (else
        _leave_lost_segment), not shorter than what we have read of it, and not left by another writer.
        Returns its size when it is still ours (None when it was left for another one)."""
        try:
            found = os.stat(self._path)
        except FileNotFoundError:
            found = None
        if found is None or (found.st_dev, found.st_ino) != self._identity:
            self._leave_lost_segment()
            return None
        if not found.st_mode & 0o200:
            self._is_left = True  # Sealed, or found damaged, by another writer: follow it.
        if found.st_size < self.offset:
            self._damaged(
                found.st_size, f"was cut to {found.st_size} bytes, below the {self.offset} read in it"
            )
        return found.st_size

    def _damaged(self, at: int, what: str) -> None:
        """Note our segment as damaged (damaged.log, once) and leave it for a new one (catch_up)."""
        note_damaged_segment(self.spool_dir, self.segment, at, what)
        self._mark_left()

    def keep_sealed_safe(self, flushed: tuple[int, int]) -> None:
        """Close the sealed segments that have landed; restore any other one deleted by hand.

        Called about once a second (ClickTracker.refresh), with the flushed position: one stat per
        sealed segment not landed yet, usually none or one. A full disk is logged and retried.
        """
        self._landed = flushed
        for number in sorted(self._sealed):
            fd, identity = self._sealed[number]
            if number >= flushed[0]:
                try:
                    stat = os.stat(segment_path(self.spool_dir, number))
                except FileNotFoundError:
                    if not self._restore_sealed(number, fd):
                        continue  # It could not be written now: try again at the next look.
                else:
                    if (stat.st_dev, stat.st_ino) == identity:
                        continue  # Still there; the flusher will get to it.
            os.close(fd)
            del self._sealed[number]

    def _restore_sealed(self, number: int, fd: int) -> bool:
        """Restore a sealed segment of ours that is gone from its path; False if it could not be written."""
        self.lock()
        try:
            # Read again under the lock: the flusher removes a segment only once it is behind this.
            segment, offset = self.flushed()
            if number < segment or os.path.exists(segment_path(self.spool_dir, number)):
                return True  # Landed and removed by the flusher, or restored already.
            since = offset if number == segment else 0
            restored = restore_segment(self.spool_dir, number, fd, since, durable=False)
        except OSError as exc:
            logger.error("could not restore deleted spool segment %s: %s; trying again", number, exc)
            return False
        finally:
            self.unlock()
        if restored:
            note_restored_segment(self.spool_dir, number, since, restored, "deleted before it landed")
        return True

    def _leave_lost_segment(self) -> None:
        """Move on from a segment that is gone from its path, holding the lock.

        The flusher removes a segment once it has landed: then read its last lines and go on as
        usual. Deleted or moved away by hand before it landed, our descriptor still reads it: put
        its unlanded lines back at its path (restore_segment) and go on appending to the restored
        file. Every worker decides alike, as each has read the same old file to its end: a file
        at the path that holds our lines up to our offset is ours to continue. Replaced by
        another file, lines appended to ours would never land: move to a new segment past every
        existing one and past the flushed position (or follow the worker that already did).
        """
        gone = self.segment
        flushed_segment, flushed_offset = self._landed = self.flushed()
        # Every line the old file holds: nobody appends to it once it is gone (we all check first).
        self._read_to_end(is_locked=True)
        if gone < flushed_segment and self.offset >= self.segment_bytes:
            return  # Sealed, landed and removed: catch_up goes on to the next one.
        since = flushed_offset if gone == flushed_segment else 0
        if gone >= flushed_segment and self.offset > since and not os.path.exists(self._path):
            restored = restore_segment(self.spool_dir, gone, self._fd, since, durable=False)
            if restored:
                note_restored_segment(
                    self.spool_dir, gone, since, restored, "deleted or moved away while in use"
                )
        later = [number for number in list_segments(self.spool_dir) if number > gone]
        if self._path_holds_our_lines():
            offset = self.offset
            self._open_segment(gone)
            self.offset = offset
            if later:  # Restored after a worker had moved on: read what it holds, then follow.
                self._read_to_end(is_locked=True)
                self._open_segment(later[0])
            return
        if later:
            if gone >= flushed_segment:
                logger.warning(
                    "spool segment %s is gone from %s; following the other workers to segment %s",
                    gone,
                    self._path,
                    later[0],
                )
            self._open_segment(later[0])
            return
        if gone < flushed_segment:  # Left early by the other workers and landed since.
            self._open_segment(flushed_segment if flushed_offset == 0 else flushed_segment + 1)
            return
        fresh = gone + 1
        if not os.path.exists(self._path):
            # Nothing in it past the flushed position (else it was restored above), so nothing is
            # lost; noted all the same, so the gap in the numbering is explained.
            lost = _count_lines(self._fd, since)
            note_missing_segment(self.spool_dir, gone, since, lost, "deleted or moved while in use")
            logger.log(
                logging.ERROR if lost else logging.WARNING,
                "spool segment %s was deleted or moved away while in use: %d click(s) in it had not "
                "reached the database and are lost; appending to segment %s",
                gone,
                lost,
                fresh,
            )
            self._open_segment(fresh)
            return
        # Replaced: by hand, or by a worker that opened its journal after the deletion, before anything
        # of it landed (it creates its start segment). Only the old file holds our unlanded lines: they
        # go to the new segment. And the file at the path is left (mark_left), so a worker appending
        # to it follows us: with a later segment there, the flusher takes this one as complete.
        moved = restore_segment(self.spool_dir, fresh, self._fd, since, durable=False, compact=True)
        try:
            leave_file(self._path)
        except OSError as exc:
            logger.warning("could not mark replaced spool segment %s read-only: %s", gone, exc)
        logger.warning(
            "spool segment %s was replaced while in use; its %d unlanded click(s) moved to segment %s, "
            "appending there",
            gone,
            moved,
            fresh,
        )
        self._open_segment(fresh)
        self.offset = os.fstat(self._fd).st_size  # Our own lines: not fed to on_line again.

    def _path_holds_our_lines(self) -> bool:
        """The file now at our segment's path holds, up to our offset, the lines our descriptor reads.

        Compares our last line (unique: it holds a subid) at the same offset, a restore's or a
        faithful copy's. Every worker that read the old file to its end compares the same bytes,
        and the new file's bytes before that offset never change, so all decide alike.
        """
        offset = self.offset
        if offset == 0:
            return False
        tail = os.pread(self._fd, min(offset, READ_CHUNK), offset - min(offset, READ_CHUNK))
        last = tail[tail.rfind(b"\n", 0, len(tail) - 1) + 1 :]
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            return os.pread(fd, len(last), offset - len(last)) == last
        finally:
            os.close(fd)

    def _read_to_end(self, is_locked: bool) -> int | None:
        """Feed the complete lines past our offset to `on_line`; holding the lock, return where a
        torn line at the end starts (None when the segment ends at a line boundary)."""
        fd, offset, on_line, segment = self._fd, self.offset, self.on_line, self.segment
        torn_at = None
        while True:
            data = os.pread(fd, READ_CHUNK, offset)
            if not data:
                break
            # PERF: unlocked, a short read is as far as this look needs to go: no second pread to find
            # the file empty (lines appended since are read under the lock). Holding the lock, read on
            # to an empty read, as our offset must be the file's end before we append.
            is_end = not is_locked and len(data) < READ_CHUNK
            if data[0] == 0 and (lines := data.lstrip(b"\0")):
                # The hole before a restored segment's unlanded part (restore_segment): landed
                # clicks, in the database. (All zeros to the end is a torn line: handled below.)
                offset += len(data) - len(lines)
                continue
            end = data.rfind(b"\n") + 1
            if not end and len(data) == READ_CHUNK:
                # No click's line is this long: garbage (a run of zeros a crash left, say). Skip it;
                # the rest of it, up to the next newline, is refused as a line of its own.
                offset += len(data)
                continue
            if end != len(data) and len(data) < READ_CHUNK:
                # Unlocked, another worker may be mid-append: take the complete lines. Holding the
                # lock nobody is: the segment was cut short mid-line by hand, or a writer died
                # mid-line (a power cut). The caller leaves it; the flusher refuses the torn line.
                if is_locked:
                    torn_at = offset + end
                data = data[:end]
                if not data:
                    break
            for line in data[:end].splitlines(keepends=True):
                on_line((segment, offset), line)
                offset += len(line)
            if is_end:
                break
        self.offset = offset
        return torn_at

    def read_line(self, segment: int, offset: int) -> bytes | None:
        """The line starting at (segment, offset), or None if it cannot be read any more.

        From the descriptor we hold on the segment, else from its path: a segment we hold no
        descriptor on has landed, and once the flusher removes it the database has its clicks.
        The caller checks the line is the one it expects (a path may hold another file by now).
        """
        if segment == self.segment:
            fd, opened = self._fd, False
        elif segment in self._sealed:
            fd, opened = self._sealed[segment][0], False
        else:
            try:
                fd, opened = os.open(segment_path(self.spool_dir, segment), os.O_RDONLY), True
            except OSError:
                return None
        try:
            size = 4096  # Most lines are a few hundred bytes.
            while True:
                data = os.pread(fd, size, offset)
                end = data.find(b"\n") + 1
                if end:
                    return data[:end]
                if len(data) < size or size >= READ_CHUNK:
                    return None
                size *= 16
        except OSError:
            return None
        finally:
            if opened:
                os.close(fd)

    def unlanded_head(self, flushed: tuple[int, int], size: int) -> bytes | None:
        """The first `size` bytes past the flushed position, read on the descriptors this journal
        holds, so no new one (/healthz near the open-file limit); b"" when nothing waits. None when
        it would take a segment this worker does not hold: then ask the files (backlog_age)."""
        held = {number: fd for number, (fd, _) in self._sealed.items()}
        held[self.segment] = self._fd
        number, offset = flushed
        while number in held:
            head = os.pread(held[number], size, offset)
            if head:
                return head
            if number == self.segment:
                # Drained. Unsealed, the next line goes here; sealed, it may be in a segment another
                # worker has begun and this one has not opened yet.
                return b"" if self.offset < self.segment_bytes and not self._is_left else None
            number, offset = number + 1, 0
        return None

    def append(self, line: bytes) -> tuple[int, int]:
        """Append our line; return its position. Call holding the lock, after catch_up(is_locked=True).

        Raises OSError (ENOSPC on a full disk) with none of the line left in the journal.
        """
        position = (self.segment, self.offset)
        try:
            written = os.write(self._fd, line)
            while written < len(line):  # Only on a full disk: the next write raises ENOSPC.
                written += os.write(self._fd, line[written:])
        except OSError:
            # Cut off what part of our line was written: holding the lock, nothing follows it, and
            # no reader has taken it (they take complete lines only). So it can never count as a
            # click, and the next append starts on a fresh line. Shrinking needs no free space.
            os.ftruncate(self._fd, self.offset)
            raise
        self.offset += len(line)
        return position


def mark_left(fd: int) -> None:
    """Clear the write bits of a segment's file: no writer appends to it any more (Journal._mark_left)."""
    mode = os.fstat(fd).st_mode & 0o7777
    if mode & 0o222:
        os.fchmod(fd, mode & ~0o222)


def leave_file(path: str) -> None:
    """mark_left the file at `path` (a segment's, replaced at it by another); gone already: nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        mark_left(fd)
    finally:
        os.close(fd)


def restore_segment(
    spool_dir: Path, segment: int, fd: int, since: int, *, durable: bool, compact: bool = False
) -> int:
    """Put a segment deleted by hand back at its path from a descriptor still open on it.

    Call holding the journal lock (nobody is then mid-append, and no worker moves on meanwhile).
    Only the unlanded part, from `since` (a line boundary at or before the flushed position),
    is copied, at its own offsets: every position in the journal and the database stays valid,
    and the landed part before it is a hole of zeros that the flusher never reads (it is past
    it) and a worker reading from the start skips. Written to a temporary name first and
    renamed, so nobody sees half of it. Returns how many lines it restored: 0 when there was
    nothing past `since` or a file is at the path again. Raises OSError (a full disk) with no
    file left behind.

    `compact`: the lines go to the start of the file, writable, under another segment's number
    (one nothing has been read from yet: Journal._leave_lost_segment).
    """
    path = segment_path(spool_dir, segment)
    end = os.fstat(fd).st_size
    if end <= since or os.path.exists(path):
        return 0
    temp = spool_dir / f".restore.{segment:08d}.{os.getpid()}.tmp"
    lines = 0
    shift = since if compact else 0
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            if not compact:  # Read-only if it was left (Journal._mark_left): no writer may take it up.
                os.fchmod(out, os.fstat(fd).st_mode & 0o7777)
            offset, last = since, b"\n"
            while offset < end and (data := os.pread(fd, min(READ_CHUNK, end - offset), offset)):
                written = 0
                while written < len(data):
                    written += os.pwrite(out, data[written:], offset + written - shift)
                lines += data.count(b"\n")
                offset, last = offset + len(data), data[-1:]
            if last != b"\n":
                # Torn by a writer that died mid-line: ended, as the next worker to read it ends it.
                os.pwrite(out, b"\n", offset - shift)
                lines += 1
            if durable:
                os.fsync(out)
        finally:
            os.close(out)
        os.rename(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if durable:
        directory = os.open(spool_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    return lines


class HeldSegments:
    """The flusher's descriptors on every segment not landed yet, opened as it lists them.

    A segment deleted by hand before it landed (while `lanner worker` was paused or slow, say) is
    then still readable here and restored (restore_segment) instead of lost. Usually one to three
    files; closed once their segment has landed. One stat per held segment per flush round keeps
    them on the file at the path (a segment restored or replaced by hand is another file), and
    sees one cut short by hand, even at a line boundary no reader stands past (_watch_size).
    """

    def __init__(self, grace_seconds: float = 0.0) -> None:
        self._held: dict[int, tuple[int, tuple[int, int]]] = {}
        self._sizes: dict[int, int] = {}  # Per held segment, the largest size seen at a line boundary.
        # The flusher thread's: a web worker may have the segment open and restore it meanwhile.
        self.grace_seconds = grace_seconds
        self._missing_since: dict[int, float] = {}

    def may_report_lost(self, segment: int) -> bool:
        """A segment gone without a descriptor of ours: report it lost now, or wait for a restore?"""
        if self.grace_seconds <= 0:
            return True
        first = self._missing_since.setdefault(segment, time.monotonic())
        return time.monotonic() - first >= self.grace_seconds

    def hold(self, spool_dir: Path, position_segment: int, listed: list[int]) -> None:
        for number in [number for number in self._held if number < position_segment]:
            os.close(self._held.pop(number)[0])
            self._sizes.pop(number, None)
        for number in [number for number in self._missing_since if number < position_segment]:
            del self._missing_since[number]
        for number in listed:
            if number < position_segment:
                continue
            path = segment_path(spool_dir, number)
            held = self._held.get(number)
            try:
                stat = os.stat(path)
                if held is not None and held[1] == (stat.st_dev, stat.st_ino):
                    self._watch_size(spool_dir, number, held[0], stat.st_size)
                    continue
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue  # Gone since it was listed: the one held (if any) is all there is.
            stat = os.fstat(fd)
            if held is not None:
                os.close(held[0])
            self._held[number] = (fd, (stat.st_dev, stat.st_ino))
            self._sizes.pop(number, None)  # Another file: its own sizes.
            self._watch_size(spool_dir, number, fd, stat.st_size)

    def _watch_size(self, spool_dir: Path, number: int, fd: int, size: int) -> None:
        """A segment only grows (a line cut back on a full disk never ended in a newline, so its
        size was never counted): smaller than a size seen at a line boundary, it was cut short by
        hand. Noted, and marked left so that every writer leaves it (Journal._mark_left)."""
        seen = self._sizes.get(number, 0)
        if size < seen:
            note_damaged_segment(spool_dir, number, size, f"was cut from {seen} to {size} bytes")
            self._sizes[number] = size
            try:
                with journal_locked(spool_dir):
                    mark_left(fd)
            except OSError as exc:
                logger.warning("could not mark damaged spool segment %s read-only: %s", number, exc)
        elif size > seen and os.pread(fd, 1, size - 1) == b"\n":
            self._sizes[number] = size

    def get(self, segment: int) -> int | None:
        held = self._held.get(segment)
        return held[0] if held else None

    def close(self) -> None:
        for fd, _ in self._held.values():
            os.close(fd)
        self._held.clear()


@contextmanager
def journal_locked(spool_dir: Path) -> Iterator[None]:
    """Hold the workers' journal lock (Journal.lock), for the flusher's rare changes to the files."""
    fd = os.open(spool_dir / "journal.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # Closing drops the flock.


def _restore_held(spool_dir: Path, segment: int, offset: int, fd: int) -> bool:
    """Restore a segment gone from its path from the flusher's descriptor; True if a file is there now."""
    with journal_locked(spool_dir):
        if os.path.exists(segment_path(spool_dir, segment)):
            return True  # A web worker restored it first.
        restored = restore_segment(spool_dir, segment, fd, offset, durable=True)
        if not restored:
            return False
        note_restored_segment(
            spool_dir, segment, offset, restored, "deleted before it landed", by_flusher=True
        )
    return True


@dataclass
class FlushResult:
    inserted: int = 0
    duplicates: int = 0
    lp_clicks: int = 0  # LP clicks landed on their clicks (models/clicks/tracker.py lp_click).
    rejected: int = 0
    segments_done: int = 0
    # Where the node has landed up to, as last read or written: the heartbeat keeps it for a look at
    # the backlog while the database does not answer (workers/runtime/heartbeat.py).
    position: tuple[int, int] | None = None


def _complete_lines(fd: int, offset: int, max_lines: int) -> Iterator[bytes]:
    # PERF: read about what the batch needs, not always READ_CHUNK: reading and splitting 1 MiB to
    # keep 100 lines cost ~1.4 ms a batch (14 µs a click at the small batches a node lands under load).
    want = min(READ_CHUNK, max_lines * LINE_GUESS)
    data = os.pread(fd, want, offset)
    end = data.rfind(b"\n") + 1
    if not end and len(data) == want < READ_CHUNK:  # A line longer than the guess: the whole chunk.
        data = os.pread(fd, READ_CHUNK, offset)
        end = data.rfind(b"\n") + 1
    if not end and len(data) == READ_CHUNK:
        return iter([data])  # Garbage longer than any line (see Journal._read_to_end): refused.
    lines = data[:end].splitlines(keepends=True)
    return iter(lines[:max_lines])


def flush_spool(
    db: Database,
    spool_dir: Path,
    segment_bytes: int,
    *,
    batch_size: int = 2000,
    on_batch: Callable[[FlushResult], None] | None = None,
    devices: UserAgentParser | None = None,
    bots: BotDetector | None = None,
    held: HeldSegments | None = None,
    before_landing: Callable[[list[list]], None] | None = None,
) -> FlushResult:
    """Land every complete journal line in the click table, one transaction per batch: what the
    journal holds when it gets to each segment (lines written meanwhile to the last one wait for the
    next call).

    Safe to run from several processes at once (the position row is re-read inside each write
    transaction) and safe to kill at any point. `held`: the flusher's descriptors, kept across
    calls (by default only for this one). `before_landing(rows)`: each batch's decoded click rows,
    just before its transaction (cluster mode: the node's own visitor file, models/clicks/landing.py);
    it may see a batch again if that transaction fails.
    """
    args = (db, spool_dir, segment_bytes, batch_size, on_batch, devices, bots)
    if held is not None:
        return _flush_spool(*args, held, before_landing)
    held = HeldSegments()
    try:
        return _flush_spool(*args, held, before_landing)
    finally:
        held.close()


def _flush_spool(
    db: Database,
    spool_dir: Path,
    segment_bytes: int,
    batch_size: int,
    on_batch: Callable[[FlushResult], None] | None,
    devices: UserAgentParser | None,
    bots: BotDetector | None,
    held: HeldSegments,
    before_landing: Callable[[list[list]], None] | None = None,
) -> FlushResult:
    result = FlushResult()
    spool_dir.mkdir(parents=True, exist_ok=True)
    claim_position(db, spool_dir)
    node = spool_node(spool_dir).name
    # The node's own partial of the rows every flusher adds onto (migration 0036): no other node's
    # flusher adds onto these rows, so flushers of one campaign never wait on each other's locks.
    partial = partial_number(node)
    devices = devices or flusher_devices()
    bots = bots or flusher_bots(())
    zones = CounterZones()
    zones.load(db.connection())
    costs = ClickCosts()
    costs.load(db.connection())
    # Costs that landed waiting for a rate stored since (while an earlier flush held the old rates).
    convert_unrated_costs(db, report_currency(db.connection()))
    rollups = RollupDelta(node=partial)
    while True:
        segment, offset = read_position(db, spool_dir)
        result.position = (segment, offset)
        path = segment_path(spool_dir, segment)
        # Looked at before reading: writers open a later segment only once they have left this one
        # (it is sealed, or it was deleted or replaced by hand, see Journal), so if one exists now,
        # whatever this one holds is already there to read.
        listed = list_segments(spool_dir)
        later = [number for number in listed if number > segment]
        held.hold(spool_dir, segment, listed)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            # Deleted by hand (the flusher removes only landed segments, behind its position).
            kept = held.get(segment)
            if kept is not None and _restore_held(spool_dir, segment, offset, kept):
                continue
            if not later or (kept is None and not held.may_report_lost(segment)):
                break
            # Gone without a descriptor to restore it from (deleted while no process had it open):
            # its clicks cannot be recovered; say so, durably, and go on with the next one.
            if kept is None and offset < segment_bytes:  # It may have held clicks past our position.
                note_missing_segment(spool_dir, segment, offset, None, "missing when the flusher got to it")
            to = later[0]
            for number in range(segment + 1, later[0]):
                if held.get(number) is not None:
                    to = number  # Gone too, but held: restored when we get to it.
                    break
                note_missing_segment(spool_dir, number, 0, None, "missing when the flusher got to it")
            _advance(db, spool_dir, segment, offset, result, to=to)
            continue
        try:
            if offset > 0 and os.pread(fd, 1, offset - 1) not in (b"\n", b"\0", b""):
                # Our position is not where a line starts (or a restored segment's hole ends): the
                # file was cut short below it and written again. The line read there is refused.
                note_damaged_segment(
                    spool_dir,
                    segment,
                    offset,
                    f"was cut short and written again below its landed position {offset}",
                )
            lines = list(_complete_lines(fd, offset, batch_size))
            size = os.fstat(fd).st_size
            torn = os.pread(fd, size - offset, offset) if later and not lines and size > offset else b""
        finally:
            os.close(fd)
        if not lines:
            if later:
                if size < offset:  # Cut short, or replaced by a shorter file: lost past our position.
                    note_damaged_segment(
                        spool_dir,
                        segment,
                        size,
                        f"was cut to {size} bytes, below its landed position {offset}",
                    )
                if torn:
                    note_damaged_segment(spool_dir, segment, offset, f"ends in a torn line at byte {offset}")
                    _keep_rejected(spool_dir, [torn], segment, "a torn line")
                    result.rejected += 1
                _advance(db, spool_dir, segment, offset, result)
                continue
            break
        rows, lp_clicks, rejected, reason = [], [], [], ""
        for line in lines:
            try:
                if is_lp_line(line):
                    subid, clicked_at, offer_id, _ = decode_lp_line(line)
                    lp_clicks.append((subid, clicked_at, offer_id))
                else:
                    rows.append(decode_row(line))
            except ValueError as exc:
                rejected.append(line)
                reason = reason or str(exc)
        fill_lookups(rows, devices, bots)
        unrated = costs.fill(rows)
        if before_landing is not None and rows:
            before_landing(rows)
        with write_tx(db):
            if read_position(db, spool_dir) != (segment, offset):
                continue  # Another flusher moved on; start again from its position.
            connection = db.connection()
            store = ClickStore(connection)
            landed = store.insert(rows)
            inserted = len(landed)
            counted = [(r[STREAM_ID], r[OFFER_ID], r[CREATED_AT]) for r in landed]
            rollups.add_clicks(landed)
            if unrated:  # Costs in a currency with no rate yet, of the clicks that landed now.
                new_subids = {row[0] for row in landed}
                CostStore(connection).add_unrated_by_subid([u for u in unrated if u[2] in new_subids])
            lp_landed = []
            if lp_clicks:
                # After the batch's clicks: a click's line precedes its LP click's in the journal. By
                # subid (a stable sort: the first LP line of a click still wins), as the parked ones
                # are taken: two nodes' flushers landing LP clicks on the same clicks lock them in order.
                lp_clicks.sort(key=lambda lp_click: lp_click[0])
                lp_landed = store.land_lp_clicks(lp_clicks, int(time.time() * 1000))
            if landed:  # Cluster mode: an LP click parked on another node's click that may be here now.
                lp_landed += store.land_parked_lp_clicks()
            if lp_landed:
                counted += [(None, offer, at) for at, offer, *_ in lp_landed]
                for _, offer_id, key, metrics, conversions in lp_landed:
                    rollups.add_lp_click(key, metrics, offer_id, conversions)
                result.lp_clicks += len(lp_landed)
            # The cap counters and the rollups last, each in key order (models/store/rows.py
            # in_lock_order), onto this node's partial: their locks are held from here to the commit only,
            # taken in one order, and only this node's flusher (and, on partial 0, a postback or a cost
            # set) ever wants them.
            add_to_counters(connection, zones.increments(connection, counted), partial)
            rollups.apply(connection)
            new_offset = offset + sum(len(line) for line in lines)
            store.set_position(node, segment, new_offset, int(time.time() * 1000))
        if rejected:
            _keep_rejected(spool_dir, rejected, segment, reason)
        result.inserted += inserted
        result.duplicates += len(rows) - inserted
        result.rejected += len(rejected)
        result.position = (segment, new_offset)
        if on_batch:
            on_batch(result)
        if not later and new_offset >= size:
            # Caught up with what the journal held when this batch was read: the lines written since
            # wait for the next round. PERF: chasing them at once landed batches of what arrived during
            # the last one's landing: ~10-13 clicks a batch at 400 clicks/s (docs/SCALING.md "The
            # flusher's batch size"), each paying a batch's whole fixed cost.
            break
    if on_batch:  # The position an idle round found, too.
        on_batch(result)
    return result


@functools.cache
def flusher_devices() -> UserAgentParser:
    """This process's User-Agent parser (and its cache), made on first use."""
    return UserAgentParser()


@functools.cache
def flusher_bots(bot_ips: tuple[str, ...], bot_ranges: Path | None = None) -> BotDetector:
    """This process's bot decision for the configured IP list and crawler ranges file, made on first use."""
    from models.lookups.crawlerranges import CrawlerRanges

    return BotDetector(bot_ips, crawler_ranges=CrawlerRanges(bot_ranges) if bot_ranges is not None else None)


def fill_lookups(rows: list[list], devices: UserAgentParser, bots: BotDetector) -> None:
    """The bot flag, device type, OS and browser of the clicks whose web worker did not need them.

    PERF: a new User-Agent costs a web worker ~20-70 µs under load to parse and check; here it is off
    the request (models/clicks/enrichment.py Lookups). The same decision as the click path's: the
    request's other signals were judged there (a line they flagged says is_bot 1), the User-Agent and
    the IP are judged here.
    """
    bots.refresh()  # A ranges file `lanner bots update` replaced: used from this batch on.
    for row in rows:
        if row[IS_BOT] == NOT_CHECKED:
            reason = bots.reason(row[USER_AGENT], row[IP])
            row[IS_BOT] = int(reason is not None)
            if reason is not None:  # The decision path keeps why: the click path left this check here.
                row[ROUTE] = with_flushed_steps(row[ROUTE], "", reason)
        if not row[DEVICE_TYPE]:
            device = devices.parse(row[USER_AGENT]) if row[USER_AGENT] else UNKNOWN_DEVICE
            row[DEVICE_TYPE] = device_type(device, bool(row[IS_BOT]))
            row[OS], row[BROWSER] = device.os, device.browser


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def _count_lines(fd: int, offset: int) -> int:
    count = 0
    while data := os.pread(fd, READ_CHUNK, offset):
        count += data.count(b"\n")
        offset += len(data)
    return count


def _advance(
    db: Database, spool_dir: Path, segment: int, offset: int, result: FlushResult, to: int | None = None
) -> None:
    with write_tx(db):
        if read_position(db, spool_dir) == (segment, offset):
            next_segment = segment + 1 if to is None else to
            node = spool_node(spool_dir).name
            ClickStore(db.connection()).set_position(node, next_segment, 0, int(time.time() * 1000))
            result.segments_done += 1


def _keep_rejected(spool_dir: Path, lines: list[bytes], segment: int, reason: str) -> None:
    logger.error(
        "spool segment %s: %d line(s) refused (%s) and moved to %s",
        segment,
        len(lines),
        reason,
        spool_dir / REJECTED_FILE,
    )
    with open(spool_dir / REJECTED_FILE, "ab") as rejected:
        for line in lines:
            rejected.write(line if line.endswith(b"\n") else line + b"\n")


@dataclass(frozen=True)
class MissingSegment:
    """A segment that was gone before it landed: clicks past `from_byte` never reached the database."""

    segment: int
    from_byte: int
    lost: int | None  # Clicks lost, when a worker still had the file open to count them.
    noted_at: str
    what: str


def note_restored_segment(
    spool_dir: Path, segment: int, since: int, restored: int, what: str, *, by_flusher: bool = False
) -> None:
    """Note in missing.log (nothing lost) and in the log that a deleted segment's unlanded clicks
    were put back from an open descriptor: a web worker's, or the flusher's."""
    note_source, log_source = (
        ("the flusher's", "the flusher's") if by_flusher else ("a web worker's", "this worker's")
    )
    note_missing_segment(
        spool_dir,
        segment,
        since,
        0,
        f"{what}; its {restored} unlanded click(s) restored from {note_source} open file",
    )
    logger.warning(
        "spool segment %s was %s: restored its %d click(s) not yet in the database from %s open file",
        segment,
        what,
        restored,
        log_source,
    )


def note_missing_segment(spool_dir: Path, segment: int, from_byte: int, lost: int | None, what: str) -> None:
    """Record a gap in missing.log (once per segment) and log it: the clicks are not recoverable,
    but the reports must not look complete without saying so."""
    if any(missing.segment == segment for missing in read_missing_segments(spool_dir)):
        return
    noted_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        with open(spool_dir / MISSING_FILE, "a", encoding="utf-8") as missing:
            missing.write(f"{segment}\t{from_byte}\t{'?' if lost is None else lost}\t{noted_at}\t{what}\n")
    except OSError as exc:  # A full disk, say: the log line below must do; never stall on it.
        logger.error("could not note missing spool segment %s in %s: %s", segment, MISSING_FILE, exc)
    if lost is None:
        logger.error(
            "spool segment %s is %s: the clicks it held past byte %s never reached the database and are "
            "lost; noted in %s",
            segment,
            what,
            from_byte,
            spool_dir / MISSING_FILE,
        )


def read_missing_segments(spool_dir: Path) -> list[MissingSegment]:
    """The gaps noted in missing.log, oldest first (lines that do not parse are skipped)."""
    try:
        text = (spool_dir / MISSING_FILE).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    noted = []
    for line in text.splitlines():
        fields = line.split("\t", 4)
        if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():
            lost = int(fields[2]) if fields[2].isdigit() else None
            noted.append(MissingSegment(int(fields[0]), int(fields[1]), lost, fields[3], fields[4]))
    return noted


@dataclass(frozen=True)
class DamagedSegment:
    """A segment found cut short or ending in a torn line: what it held past `at` and had not landed
    is lost (the torn line itself is in rejected.log)."""

    segment: int
    at: int
    noted_at: str
    what: str


def note_damaged_segment(spool_dir: Path, segment: int, at: int, what: str) -> None:
    """Record a damaged segment in damaged.log (once per segment) and log it, by whichever process
    finds it first: a web worker about to append, one starting, the flusher, never `lanner spool status`."""
    if any(damaged.segment == segment for damaged in read_damaged_segments(spool_dir)):
        return
    noted_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        with open(spool_dir / DAMAGED_FILE, "a", encoding="utf-8") as damaged:
            damaged.write(f"{segment}\t{at}\t{noted_at}\t{what}\n")
    except OSError as exc:  # A full disk, EMFILE: the log line below must do; never stall on it.
        logger.error("could not note damaged spool segment %s in %s: %s", segment, DAMAGED_FILE, exc)
    logger.error(
        "spool segment %s %s (cut short by hand, or a power cut mid-write): no click is appended to it "
        "any more; what it held past byte %s and had not reached the database is lost; noted in %s",
        segment,
        what,
        at,
        spool_dir / DAMAGED_FILE,
    )


def read_damaged_segments(spool_dir: Path) -> list[DamagedSegment]:
    """The damage noted in damaged.log, oldest first (lines that do not parse are skipped)."""
    try:
        text = (spool_dir / DAMAGED_FILE).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    noted = []
    for line in text.splitlines():
        fields = line.split("\t", 3)
        if len(fields) == 4 and fields[0].isdigit() and fields[1].isdigit():
            noted.append(DamagedSegment(int(fields[0]), int(fields[1]), fields[2], fields[3]))
    return noted


class SpoolSync:
    """fsync of the segments that hold clicks not yet in the database, once a second (the flusher).

    A failed fsync is never retried as it was (fsyncgate): once writeback of a file has failed, the
    kernel may have marked the dirty pages clean without writing them, and reports the error once;
    the next fsync of that file answers success although those bytes never reached the disk. So the
    bytes a failed fsync leaves not known durable (from the segment's size at its last good fsync to
    its end) are written again, in place, before every later fsync of it, and only the success of
    such an fsync makes them durable. They are copied from what the file reads back (the page cache
    keeps what it could not write back) at the same offsets: the same bytes, so a reader sees no
    change; a line the kernel lost and cannot read back was lost before this could help.
    Meanwhile the clicks still land (the flusher goes on: once in the database and checkpointed, they
    no longer depend on the segment), and the failure is an ERROR in the log once a second.
    """

    def __init__(self) -> None:
        # Per segment: (inode, size at its last good fsync) and (inode, first byte not durable).
        self.durable: dict[int, tuple[int, int]] = {}
        self.suspect: dict[int, tuple[int, int]] = {}
        # A descriptor per unlanded segment, opened for writing while it still could be (a segment
        # is made read-only as writers leave it) and kept, so its failed bytes can be written again.
        self.fds: dict[int, tuple[int, int]] = {}  # segment -> (fd, inode)

    def close(self) -> None:
        for fd, _ in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def sync(self, db: Database, spool_dir: Path) -> None:
        """fsync every unlanded segment, writing again first what an earlier failure left undurable.
        Raises the first OSError after trying every segment."""
        self.sync_from(read_position(db, spool_dir)[0], spool_dir)

    def sync_from(self, segment: int, spool_dir: Path) -> None:
        """`sync` with the flushed position's segment given: those before it have landed."""
        for number in [n for n in self.fds if n < segment]:  # Landed: the database holds them now.
            self._forget(number)
        failure: OSError | None = None
        for number in list_segments(spool_dir):
            if number < segment:
                continue
            try:
                fd, inode = self._descriptor(spool_dir, number)
            except FileNotFoundError:
                continue
            except OSError as exc:
                failure = failure or exc
                continue
            try:
                self._sync_segment(number, fd, inode)
            except OSError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _forget(self, number: int) -> None:
        fd, _ = self.fds.pop(number, (-1, 0))
        if fd >= 0:
            os.close(fd)
        self.durable.pop(number, None)
        self.suspect.pop(number, None)

    def _descriptor(self, spool_dir: Path, number: int) -> tuple[int, int]:
        path = segment_path(spool_dir, number)
        inode = os.stat(path).st_ino
        kept = self.fds.get(number)
        if kept is not None and kept[1] == inode:
            return kept
        self._forget(number)  # Another file at its path (a restored segment): start over with it.
        try:
            fd = os.open(path, os.O_RDWR)
        except PermissionError:  # Left already: read-only to everyone (Journal._mark_left).
            fd = os.open(path, os.O_RDONLY)
        self.fds[number] = (fd, os.fstat(fd).st_ino)
        return self.fds[number]

    def _sync_segment(self, number: int, fd: int, inode: int) -> None:
        size = os.fstat(fd).st_size
        start = self.durable.get(number, (inode, 0))[1]
        suspect = self.suspect.get(number)
        if suspect is not None:
            start = min(start, suspect[1])
            self._write_again(fd, suspect[1], size)  # EBADF on a read-only one: it stays suspect.
        try:
            os.fsync(fd)
        except OSError:
            self.suspect[number] = (inode, start)
            raise
        self.suspect.pop(number, None)
        self.durable[number] = (inode, size)

    @staticmethod
    def _write_again(fd: int, start: int, end: int) -> None:
        offset = start
        while offset < end and (data := os.pread(fd, min(READ_CHUNK, end - offset), offset)):
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], offset + written)
            offset += len(data)


def remove_flushed_segments(db: Database, spool_dir: Path) -> int:
    """Delete sealed segments whose clicks are in the database. Call after a checkpoint."""
    segment, _ = read_position(db, spool_dir)
    removed = 0
    for number in list_segments(spool_dir):
        if number < segment:
            segment_path(spool_dir, number).unlink(missing_ok=True)
            removed += 1
    return removed


def unlanded_bytes(db: Database, spool_dir: Path) -> int:
    """Bytes of the journal past the flushed position, from the segments' sizes (no reading)."""
    segment, offset = read_position(db, spool_dir)
    total = 0
    for number in list_segments(spool_dir) if spool_dir.exists() else []:
        if number >= segment:
            total += max(
                0, _file_size(segment_path(spool_dir, number)) - (offset if number == segment else 0)
            )
    return total


@dataclass
class SpoolStatus:
    position: tuple[int, int]
    segments: list[int]
    pending_bytes: int
    pending_clicks: int
    # Segments gone before they landed (clicks lost): noted in missing.log, or not reached yet.
    missing_segments: list[int]
    rejected_lines: int  # Lines in rejected.log: refused by the flusher, kept for inspection.
    # Segments cut short or ending in a torn line (clicks may be lost): noted in damaged.log, or seen now.
    damaged_segments: list[int]


def spool_status(db: Database, spool_dir: Path) -> SpoolStatus:
    """How much of the journal is not in the database yet (counts lines; reads the files)."""
    segment, offset = read_position(db, spool_dir)
    segments = list_segments(spool_dir) if spool_dir.exists() else []
    pending_bytes = pending_clicks = 0
    damaged = {noted.segment for noted in read_damaged_segments(spool_dir)}
    torn = []
    for number in segments:
        if number < segment:
            continue
        try:
            journal = open(segment_path(spool_dir, number), "rb")
        except FileNotFoundError:
            continue  # Landed and removed by the flusher since we listed it.
        with journal:
            if number == segment and offset > 0:
                journal.seek(offset - 1)  # Where the landed part ends: a newline (or a restore's hole).
                if journal.read(1) not in (b"\n", b"\0"):
                    damaged.add(number)  # Cut short below the landed position (and written again?).
            last = b"\n"
            for chunk in iter(functools.partial(journal.read, READ_CHUNK), b""):
                pending_bytes += len(chunk)
                pending_clicks += chunk.count(b"\n")
                last = chunk[-1:]
            if last != b"\n":
                torn.append(number)
    if torn:
        # Seen again holding the journal lock: a worker may have been mid-append to the last one.
        with journal_locked(spool_dir):
            damaged.update(number for number in torn if _ends_torn(segment_path(spool_dir, number)))
    return SpoolStatus(
        (segment, offset),
        segments,
        pending_bytes,
        pending_clicks,
        _missing_segments(db, spool_dir, segments),
        _rejected_lines(spool_dir),
        sorted(damaged),
    )


def _ends_torn(path: Path) -> bool:
    try:
        with open(path, "rb") as segment:
            size = segment.seek(0, os.SEEK_END)
            return size > 0 and os.pread(segment.fileno(), 1, size - 1) != b"\n"
    except FileNotFoundError:
        return False


def _missing_segments(db: Database, spool_dir: Path, segments: list[int]) -> list[int]:
    noted = {missing.segment: missing.lost for missing in read_missing_segments(spool_dir)}
    missing = {number for number, lost in noted.items() if lost != 0}
    # Read after listing: the flusher only removes segments behind its position, which only grows.
    segment, offset = read_position(db, spool_dir)
    newest = max(segments, default=segment if offset > 0 else segment - 1)
    present = set(segments)
    missing.update(n for n in range(segment, newest + 1) if n not in present and noted.get(n) != 0)
    return sorted(missing)


def _rejected_lines(spool_dir: Path) -> int:
    try:
        rejected = open(spool_dir / REJECTED_FILE, "rb")
    except FileNotFoundError:
        return 0
    with rejected:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: rejected.read(READ_CHUNK), b""))
