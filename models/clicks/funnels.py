"""The lander step's unflushed clicks held by a web worker: what an LP click asks before the database.

An LP click (ClickTracker.lp_click) finds its click, and a first LP click for the subid, among every
worker's journal lines the flusher has not landed yet, then in the database. So each worker holds,
in journal order, every worker's unflushed clicks sent to a lander (subid -> journal position) and
LP clicks (subid -> position, offer_id, Location), and forgets them once the flushed position passes
them (`prune`).

Two tiers keep its memory bounded however long the flusher is away, as for the recent visitors
(models/clicks/visitors.py):
- in memory, the newest FUNNELS_IN_MEMORY of each (a count, not an age: it bounds the worker whatever
  the click rate, and a worker replaying a long backlog at start holds no more);
- on disk, the older ones: one row each in a private SQLite file (models/store/spill.py
  LanderSpillFile: created in the spool directory and unlinked at once, a 1 MB page cache), moved
  there SPILL_MOVES at a time, the oldest first. A lookup asks memory first, then the file (only while
  it holds rows). Rows the flusher has passed go in one indexed range delete per prune; the file is
  closed, and its space freed, once it has landed whole.
If the file cannot be written (a full disk), the entries stay in memory and answers stay exact: memory
grows again, with an error in the log (once a minute), and the move is tried again later.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from models.clicks.throttledlog import ThrottledLog
from models.clicks.visitors import packed_position
from models.store.spill import SPILL_ERRORS, LanderSpillFile

logger = logging.getLogger(__name__)

# Entries of each map kept in memory (~0.2 KB a lander click, ~0.4 KB an LP click with its Location):
# 5.5 s of funnels at 1,500/s. While the flusher keeps up a map holds about a second's.
FUNNELS_IN_MEMORY = 8192
SPILL_MOVES = 1024  # Entries moved to disk at once (~2 ms), the oldest, when a map is full.

_OFFSET_MASK = (1 << 48) - 1

Position = tuple[int, int]
LpClickHeld = tuple[Position, "int | None", str]


def _unpacked(packed: int) -> Position:
    return packed >> 48, packed & _OFFSET_MASK


class FunnelIndex:
    """Unflushed lander clicks and LP clicks by subid, in journal order: the newest in memory, the
    older ones on disk."""

    def __init__(
        self, spill_dir: Path, clock: Callable[[], float] = time.monotonic, in_memory: int = FUNNELS_IN_MEMORY
    ) -> None:
        self.clicks: dict[str, Position] = {}
        self.lp_clicks: dict[str, LpClickHeld] = {}
        self.spill_dir = spill_dir
        self.in_memory = in_memory
        self.clock = clock  # Paces retries of a failed file.
        self._spill: LanderSpillFile | None = None
        self.spilled_clicks = self.spilled_lp_clicks = 0  # Rows moved to the file and not deleted.
        # The newest packed position moved to each table; -1 while it holds none. A failed write may
        # leave some of its rows in, uncounted: their entries are still in memory, which is asked first.
        self._clicks_through = self._lp_clicks_through = -1
        self._flushed_at = -1  # The packed flushed position last pruned to.
        self._next_spill_try = 0.0
        self._spill_failures = 0
        self._log = ThrottledLog(logger, logging.ERROR, interval=60.0, clock=clock)

    def add_click(self, subid: str, position: Position) -> None:
        """Hold the unflushed click `subid`, sent to a lander, whose line is at `position`."""
        clicks = self.clicks
        clicks[subid] = position
        if len(clicks) >= self.in_memory and self.clock() >= self._next_spill_try:
            self._move_clicks()

    def add_lp_click(self, subid: str, position: Position, offer_id: int | None, location: str) -> None:
        """Hold the unflushed LP click of `subid`: its line's position, its offer and Location."""
        lp_clicks = self.lp_clicks
        lp_clicks[subid] = (position, offer_id, location)
        if len(lp_clicks) >= self.in_memory and self.clock() >= self._next_spill_try:
            self._move_lp_clicks()

    def click(self, subid: str) -> Position | None:
        """Where the line of the held click `subid` is, or None (not held: landed, or no such click)."""
        position = self.clicks.get(subid)
        if position is None and self._clicks_through >= 0:
            packed = self._read(LanderSpillFile.click, subid)
            # A row before the flushed position was left by a failed delete: the database has it.
            if packed is not None and packed >= self._flushed_at:
                return _unpacked(packed)
        return position

    def lp_click(self, subid: str) -> LpClickHeld | None:
        """(position, offer_id, location) of the held LP click of `subid`, or None."""
        held = self.lp_clicks.get(subid)
        if held is None and self._lp_clicks_through >= 0:
            row = self._read(LanderSpillFile.lp_click, subid)
            if row is not None:
                packed, offer_id, location = row
                return _unpacked(packed), offer_id, location
        return held

    def prune(self, flushed: Position) -> None:
        """Forget the clicks and LP clicks that have landed (the database has them now)."""
        # PERF: one pass each, then the deletes: `next(iter(d))` after each delete would scan the
        # slots already emptied at the front every time (quadratic: 40 ms for 8,000).
        landed = []
        for subid, position in self.clicks.items():
            if position >= flushed:
                break
            landed.append(subid)
        for subid in landed:
            del self.clicks[subid]
        landed.clear()
        for subid, held in self.lp_clicks.items():
            if held[0] >= flushed:
                break
            landed.append(subid)
        for subid in landed:
            del self.lp_clicks[subid]
        at = packed_position(flushed)
        if at > self._flushed_at:
            self._flushed_at = at
            if self._spill is not None:
                self._forget(at)

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _move_clicks(self) -> None:
        clicks = self.clicks
        moving = list(itertools.islice(clicks, SPILL_MOVES))
        rows = [(subid, packed_position(clicks[subid])) for subid in moving]
        if self._write(LanderSpillFile.hold_clicks, rows):
            for subid in moving:
                del clicks[subid]
            self.spilled_clicks += len(rows)
            self._clicks_through = max(self._clicks_through, max(packed for _, packed in rows))

    def _move_lp_clicks(self) -> None:
        lp_clicks = self.lp_clicks
        moving = list(itertools.islice(lp_clicks, SPILL_MOVES))
        rows = []
        for subid in moving:
            position, offer_id, location = lp_clicks[subid]
            rows.append((subid, packed_position(position), offer_id, location))
        if self._write(LanderSpillFile.hold_lp_clicks, rows):
            for subid in moving:
                del lp_clicks[subid]
            self.spilled_lp_clicks += len(rows)
            self._lp_clicks_through = max(self._lp_clicks_through, max(row[1] for row in rows))

    def _write(self, hold: Callable, rows: list[tuple]) -> bool:
        """Write the rows to the file (made on first use); False, the entries kept in memory, if it fails."""
        try:
            if self._spill is None:
                self._spill = LanderSpillFile(self.spill_dir)
            hold(self._spill, rows)
        except SPILL_ERRORS as exc:
            # Tried again later, less often the more it fails; meanwhile memory holds everything.
            self._spill_failures += 1
            self._next_spill_try = self.clock() + min(60, 2 ** (self._spill_failures - 1))
            self._log(
                "cannot hold unflushed lander clicks on disk in %s (%s): kept in memory", self.spill_dir, exc
            )
            return False
        self._spill_failures = 0
        return True

    def _read(self, read: Callable, subid: str):
        try:
            return read(self._spill, subid)
        except SPILL_ERRORS as exc:  # The disk failing under it: answer from memory and the database.
            self._log("cannot read unflushed lander clicks back from %s (%s)", self.spill_dir, exc)
            return None

    def _forget(self, at: int) -> None:
        """Delete the file's rows before the packed flushed position `at`; close it once all have landed."""
        if at > self._clicks_through and at > self._lp_clicks_through:
            self.close()  # All of it has landed: one close instead of deleting rows.
            self.spilled_clicks = self.spilled_lp_clicks = 0
            self._clicks_through = self._lp_clicks_through = -1
            return
        spill = self._spill
        assert spill is not None  # Rows not through yet are in the file.
        try:
            if self._clicks_through >= 0:
                if at > self._clicks_through:
                    spill.forget_clicks(None)
                    self.spilled_clicks, self._clicks_through = 0, -1
                else:
                    self.spilled_clicks = max(0, self.spilled_clicks - spill.forget_clicks(at))
            if self._lp_clicks_through >= 0:
                if at > self._lp_clicks_through:
                    spill.forget_lp_clicks(None)
                    self.spilled_lp_clicks, self._lp_clicks_through = 0, -1
                else:
                    self.spilled_lp_clicks = max(0, self.spilled_lp_clicks - spill.forget_lp_clicks(at))
        except SPILL_ERRORS as exc:
            # Landed rows stay: `click` ignores them (the database has the click and its LP click), an
            # LP click's offer is the one landed.
            self._log("cannot forget landed lander clicks in %s (%s)", self.spill_dir, exc)
