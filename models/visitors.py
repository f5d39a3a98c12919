"""Recent visitors held in a web worker's memory: the clicks the database may not have yet.

Every worker tails the shared spool journal, so this index holds every click of every worker that
is not yet flushed (plus the last seconds of flushed ones, for debounce). Together with one indexed
probe of the database it answers "seen before?" exactly, without waiting for the flusher.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class RecentClick:
    position: tuple[int, int]  # (segment, byte offset) in the spool journal.
    created_at: int  # Unix ms.
    campaign_id: int
    stream_id: int | None
    offer_id: int | None
    subid: str
    user_agent: str
    location: str  # The exact Location answered, so a debounced repeat gets the same one.


class VisitorIndex:
    """Clicks by (ip, ua_hash), in journal order, pruned once flushed and old enough."""

    def __init__(self) -> None:
        self._by_visitor: dict[tuple[str, int], deque[RecentClick]] = {}
        self._order: deque[tuple[tuple[str, int], RecentClick]] = deque()

    def __len__(self) -> int:
        return len(self._order)

    def add(self, ip: str, ua_hash: int, click: RecentClick) -> None:
        key = (ip, ua_hash)
        clicks = self._by_visitor.get(key)
        if clicks is None:
            clicks = self._by_visitor[key] = deque()
        clicks.append(click)
        self._order.append((key, click))

    def visits(self, ip: str, ua_hash: int) -> deque[RecentClick] | tuple[()]:
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
            clicks.popleft()
            if not clicks:
                del self._by_visitor[key]
            removed += 1
        return removed
