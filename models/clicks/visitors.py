"""Recent visitors held by a web worker: the clicks the database may not have yet.

Every worker tails the shared spool journal, so this index holds every click of every worker that
is not yet flushed (plus the last seconds of flushed ones, for debounce). Together with one indexed
probe of the database it answers "seen before?" exactly, without waiting for the flusher.

Two tiers keep its memory bounded however long the flusher is away:
- in memory, the clicks of the last few seconds, each with where its journal line is, since a
  debounced repeat answers the stored subid and Location: a landed click for the debounce window
  and a margin, one the flusher has not landed yet for SPILL_AFTER (longer, so a flusher a few
  seconds behind under load costs no disk writes);
- on disk, every unflushed click older than that, reduced to what uniqueness, offer rotation and visitor
  binding ask: per visitor and (campaign, stream, offer), the time of the latest click. That is one
  row in a private SQLite file (~26 bytes a row, 1 MB of page cache) that no other process sees:
  it is created in the spool directory and unlinked at once. It is emptied in one go once the
  flusher has landed everything in it. Caps need no per-click memory: ClickCounters counts.
If the file cannot be written (a full disk), the clicks stay in memory as before: answers stay
exact and memory grows, with an error in the log.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from models.store.spill import SPILL_ERRORS, SpillFile

logger = logging.getLogger(__name__)

SPILL_BATCH = 4096  # Rows a worker replaying the journal collects before writing them (~15 ms).
SPILL_MOVES = 1024  # Clicks moved from memory to disk per prune at most (~4 ms): see `is_spilling`.


def packed_position(position: tuple[int, int]) -> int:
    """A journal position (segment, byte offset) as one int that orders the same way."""
    segment, offset = position
    return segment << 48 | offset  # A segment is far below 2**48 bytes (LANNER_SPOOL_SEGMENT_BYTES).


_OFFSET_MASK = (1 << 48) - 1


class RecentClick:
    """One held click by visitor: what history and debounce ask of it, and where its line is.

    PERF: a worker holds every worker's clicks of the last seconds (16,000 at 4,000 clicks/s), so
    each costs what it must: one object with ints in its slots, ~180 bytes. Its line stays in the
    journal (the page cache has it): only a repeat within debounce reads it back
    (ClickTracker._held_record). Holding the line cost ~330 bytes more a click, ~5 MB per worker
    at 4,000/s.
    """

    __slots__ = ("key", "position", "created_at", "campaign_id", "stream_id", "offer_id")

    def __init__(
        self,
        position: tuple[int, int],
        created_at: int,
        campaign_id: int,
        stream_id: int | None,
        offer_id: int | None,
    ) -> None:
        self.key = 0  # The visitor (models.clicks.record.visitor_key), set by VisitorIndex.add.
        self.position = packed_position(position)  # Where the line starts in the spool journal.
        self.created_at = created_at  # Unix ms.
        self.campaign_id, self.stream_id, self.offer_id = campaign_id, stream_id, offer_id

    @property
    def journal_position(self) -> tuple[int, int]:
        """The (segment, byte offset) its line starts at."""
        return self.position >> 48, self.position & _OFFSET_MASK


class VisitorIndex:
    """Clicks by (ip, ua_hash), in journal order: recent ones in memory, older unflushed ones on disk."""

    def __init__(
        self, spill_dir: Path, hot_after_ms: int = 0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        # By visitor key: the click itself, or a list once the visitor has clicked again (most never do).
        self._by_visitor: dict[int, RecentClick | list[RecentClick]] = {}
        self._order: deque[RecentClick] = deque()
        self.spill_dir = spill_dir
        self.hot_after_ms = hot_after_ms  # Landed clicks older than this leave memory.
        self.spill_after_ms = hot_after_ms  # Unflushed clicks older than this are held on disk.
        self._spill: SpillFile | None = None
        # By visitor key: rows for the spill file not written yet (all of them while it fails).
        self._pending: dict[int, list[tuple[int, int | None, int | None, int]]] = {}
        self._pending_count = 0
        self.spilled = 0  # Clicks in the spill file or pending for it (clicks, not rows).
        self._spilled_through = -1  # The (packed) journal position of the latest one.
        self.clock = clock  # Paces retries of a failed spill file.
        self._next_spill_try = self._next_spill_error = 0.0
        self._spill_failures = 0
        self._spill_version = 0  # Moves on whenever the file's rows change.
        # The last visitor read back from the file: a click asks twice, once under the journal lock.
        self._last_held: tuple[int, int, list] = (0, -1, [])

    def __len__(self) -> int:
        return len(self._order) + self.spilled

    @property
    def in_memory(self) -> int:
        """Clicks held with their journal line: the last seconds' (more while the flusher catches up)."""
        return len(self._order)

    def add(self, key: int, click: RecentClick) -> None:
        """Hold `click` of the visitor `key` (models.clicks.record.visitor_key)."""
        click.key = key
        if click.created_at < self.hot_after_ms:
            # Too old for debounce already (a worker replaying the journal at start): straight to disk.
            self._hold(click)
            if self._pending_count >= SPILL_BATCH:
                self._write_pending()
            return
        held = self._by_visitor.get(key)
        if held is None:
            self._by_visitor[key] = click
        elif isinstance(held, list):
            held.append(click)
        else:
            self._by_visitor[key] = [held, click]
        self._order.append(click)

    def visits(self, key: int) -> list[RecentClick] | tuple[RecentClick, ...]:
        """The visitor's clicks held in memory (the recent ones), oldest first."""
        held = self._by_visitor.get(key)
        if held is None:
            return ()
        return held if isinstance(held, list) else (held,)

    def history(self, key: int) -> list[tuple[int, int | None, int | None, int]]:
        """Every held click of the visitor as (campaign_id, stream_id, offer_id, created_at).

        From disk, one row stands for all of the visitor's clicks through one campaign, stream and
        offer (the latest): every question asked of a history is "any since" or "the latest".
        """
        recent = [
            (click.campaign_id, click.stream_id, click.offer_id, click.created_at)
            for click in self.visits(key)
        ]
        if self.spilled:
            pending = self._pending.get(key)
            if pending:
                recent += pending
            if self._spill is not None:
                recent += self._held(key)
        return recent

    def _held(self, key: int) -> list[tuple[int, int | None, int | None, int]]:
        last_key, version, rows = self._last_held
        if last_key == key and version == self._spill_version:
            return rows
        assert self._spill is not None  # history() asks only when there is one.
        try:
            rows = self._spill.held(key)
        except SPILL_ERRORS as exc:  # The disk failing under it: answer from memory alone.
            self._log_spill_error("cannot read unflushed clicks back from %s (%s)", exc)
            return []
        self._last_held = (key, self._spill_version, rows)
        return rows

    def prune(self, flushed: tuple[int, int], keep_after_ms: int, spill_after_ms: int) -> int:
        """Forget clicks that are in the database (before `flushed`) and older than `keep_after_ms`;
        hold the unflushed ones older than `spill_after_ms` on disk. Returns how many left memory."""
        self.hot_after_ms = keep_after_ms
        self.spill_after_ms = spill_after_ms
        order = self._order
        flushed_at = packed_position(flushed)
        removed = 0
        while order and order[0].position < flushed_at and order[0].created_at < keep_after_ms:
            self._forget_oldest()
            removed += 1
        if self.spilled and self._spilled_through < flushed_at:
            self._drop_spill()  # All of it has landed: one close instead of deleting rows.
        # PERF: at most SPILL_MOVES per call, so no click waits long behind it; the caller prunes
        # again soon while `is_spilling`.
        moved = 0
        while order and order[0].created_at < spill_after_ms and moved < SPILL_MOVES:
            self._hold(order[0])
            self._forget_oldest()
            moved += 1
        if self._pending_count:
            self._write_pending()
        return removed + moved

    @property
    def is_spilling(self) -> bool:
        """Clicks too old for memory are still in it: prune again soon."""
        return bool(self._order) and self._order[0].created_at < self.spill_after_ms

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _forget_oldest(self) -> None:
        key = self._order.popleft().key
        held = self._by_visitor[key]
        if type(held) is not list:
            del self._by_visitor[key]
        elif len(held) == 2:
            self._by_visitor[key] = held[1]
        else:
            del held[0]

    def _hold(self, click: RecentClick) -> None:
        row = (click.campaign_id, click.stream_id, click.offer_id, click.created_at)
        key = click.key
        rows = self._pending.get(key)
        if rows is None:
            self._pending[key] = [row]
        else:
            rows.append(row)
        self._pending_count += 1
        self.spilled += 1
        self._spilled_through = max(self._spilled_through, click.position)

    def _write_pending(self) -> None:
        """Write the pending rows to the spill file; on failure keep them (in memory) and retry later."""
        now = self.clock()
        if now < self._next_spill_try:
            return
        rows = (
            (key, campaign, stream or 0, offer or 0, created)
            for key, held in self._pending.items()
            for campaign, stream, offer, created in held
        )
        self._spill_version += 1  # Even a failed write may have changed some rows.
        try:
            if self._spill is None:
                self._spill = SpillFile(self.spill_dir)
            self._spill.hold(rows)
        except SPILL_ERRORS as exc:
            # Each try writes everything pending from the start: try less often the more it fails.
            self._spill_failures += 1
            self._next_spill_try = now + min(60, 2 ** (self._spill_failures - 1))
            self._log_spill_error("cannot hold unflushed clicks on disk in %s (%s): kept in memory", exc)
            return
        self._pending.clear()
        self._pending_count = 0
        self._spill_failures = 0

    def _log_spill_error(self, message: str, exc: Exception) -> None:
        now = self.clock()
        if now >= self._next_spill_error:
            self._next_spill_error = now + 60
            logger.error(message, self.spill_dir, exc)

    def _drop_spill(self) -> None:
        self.close()
        self._spill_version += 1
        self._pending.clear()
        self._pending_count = 0
        self.spilled = 0
        self._spilled_through = -1
