"""Recent visitors held in a web worker's memory: the clicks the database may not have yet.

Every worker tails the shared spool journal, so this index holds every click of every worker that
is not yet flushed (plus the last seconds of flushed ones, for debounce). Together with one indexed
probe of the database it answers "seen before?" exactly, without waiting for the flusher.
"""

from __future__ import annotations

from collections import deque

from models.record import decode_line


class RecentClick:
    """One journal line held by visitor; another worker's line is parsed only if looked at."""

    __slots__ = ("position", "created_at", "_record", "_line")

    def __init__(
        self, position: tuple[int, int], created_at: int, record: list | None, line: bytes = b""
    ) -> None:
        self.position = position  # (segment, byte offset) in the spool journal.
        self.created_at = created_at  # Unix ms.
        self._record = record
        self._line = line

    @property
    def record(self) -> list | None:
        """The click record (models/record.py layout), or None for a line that does not parse."""
        if self._record is None and self._line:
            try:
                self._record = decode_line(self._line)
            except ValueError:
                self._line = b""
            else:
                self._line = b""
        return self._record


class VisitorIndex:
    """Clicks by (ip, ua_hash), in journal order, pruned once flushed and old enough."""

    def __init__(self) -> None:
        # Per visitor a plain list: most visitors click once, and a list is lighter than a deque.
        self._by_visitor: dict[tuple[str, int], list[RecentClick]] = {}
        self._order: deque[tuple[tuple[str, int], RecentClick]] = deque()

    def __len__(self) -> int:
        return len(self._order)

    def add(self, ip: str, ua_hash: int, click: RecentClick) -> None:
        key = (ip, ua_hash)
        clicks = self._by_visitor.get(key)
        if clicks is None:
            self._by_visitor[key] = [click]
        else:
            clicks.append(click)
        self._order.append((key, click))

    def visits(self, ip: str, ua_hash: int) -> list[RecentClick] | tuple[()]:
        return self._by_visitor.get((ip, ua_hash), ())

    def prune(self, flushed: tuple[int, int], keep_after_ms: int) -> int:
        """Forget clicks that are in the database (before `flushed`) and older than `keep_after_ms`."""
        removed = 0
        order = self._order
        while order:
            key, click = order[0]
            if click.position >= flushed or click.created_at >= keep_after_ms:
                break
            order.popleft()
            clicks = self._by_visitor[key]
            if len(clicks) == 1:
                del self._by_visitor[key]
            else:
                del clicks[0]
            removed += 1
        return removed
