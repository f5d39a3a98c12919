"""A visitor's history: their earlier clicks (same IP + User-Agent) within the uniqueness windows.

Read once per click before routing, from the database (one indexed probe, models/store/hotpath.py)
and from the journal lines not flushed yet (the recent-visitor index, models/clicks/visitors.py). The
router asks it whether the visitor is unique in a campaign or stream, which offers they saw and where
a bound visitor went last; under the journal lock it gives the click's three uniqueness flags.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from models.routing.router import History
from models.store import hotpath

if TYPE_CHECKING:
    import sqlite3

    from models.clicks.visitors import VisitorIndex
    from models.routing.config import CampaignConfig


class VisitorHistory(History):
    """The visitor's clicks in the windows: database rows plus unflushed ones from the journal."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        probe: hotpath.VisitorProbe,
        visitor: tuple,
        rows: list[tuple],
        recent: list[tuple],
        since: Callable[[int], int],
        stored_repeat: tuple | None,
    ) -> None:
        self.conn, self.probe, self.visitor = conn, probe, visitor  # visitor: VisitorProbe.visitor's
        # The database's rows cut at VISITOR_HISTORY_LIMIT: then each scope is asked exactly.
        self.is_truncated = len(rows) >= hotpath.VISITOR_HISTORY_LIMIT
        self.db_rows = rows
        # (campaign_id, stream_id, offer_id, created_at): journal lines not flushed yet, then the rows.
        self.rows = recent + rows if recent else rows
        self.since = since  # campaign_id -> the start of its uniqueness window (unix ms).
        # The visitor's click in the campaign within debounce that only the database has (a worker
        # that started moments ago has not read it from the journal): (subid, stream, offer, _).
        self.stored_repeat = stored_repeat

    def landed_repeat(self, since: int, campaign_id: int, user_agent: str) -> tuple | None:
        """The visitor's latest click in the campaign since `since` as the database has it."""
        return self.probe.last_click(self.conn, self.visitor, since, campaign_id, user_agent)

    def seen_in_campaign(self, campaign_id: int) -> bool:
        since = self.since(campaign_id)
        if any(c == campaign_id and created >= since for c, _, _, created in self.rows):
            return True
        if self.is_truncated:
            return bool(self.probe.seen(self.conn, self.visitor, 0, since, campaign_id, None)[1])
        return False

    def seen_in_stream(self, stream_id: int) -> bool:
        for campaign_id, stream, _, created in self.rows:
            if stream == stream_id and created >= self.since(campaign_id):
                return True
        if self.is_truncated:
            # The stream's campaign is the one being routed; its window is the widest we asked for.
            since = min(self.since(c) for c, *_ in self.rows)
            return bool(self.probe.seen(self.conn, self.visitor, 0, since, -1, stream_id)[2])
        return False

    def offers_in_stream(self, stream_id: int) -> set[int]:
        """Offers this visitor was sent to through the stream (the latest 64 clicks for a NAT address)."""
        return {
            offer
            for campaign_id, stream, offer, created in self.rows
            if stream == stream_id and offer is not None and created >= self.since(campaign_id)
        }

    def last_in_campaign(self, campaign_id: int) -> tuple[int | None, int | None] | None:
        since = self.since(campaign_id)
        latest = None
        for c, stream, offer, created in self.rows:
            if c == campaign_id and created >= since and (latest is None or created > latest[0]):
                latest = (created, stream, offer)
        return (latest[1], latest[2]) if latest else None

    def uniqueness(
        self,
        index: VisitorIndex,
        visitor: int,
        global_since: int,
        campaign: CampaignConfig,
        now_ms: int,
        stream_id: int | None,
    ) -> tuple[int, int, int]:
        """The three uniqueness flags, from the database rows and every journal line of the visitor
        in `index` as read under the lock (the history's own copy of the journal was taken before it)."""
        campaign_since = now_ms - campaign.uniqueness_ms
        campaign_id = campaign.id
        seen_global = seen_campaign = seen_stream = 0
        if self.is_truncated:
            seen_global, seen_campaign, seen_stream = self.probe.seen(
                self.conn, self.visitor, global_since, campaign_since, campaign_id, stream_id
            )
        for c, s, _, created in self.db_rows + index.history(visitor):
            if created >= global_since:
                seen_global = 1
            if c == campaign_id and created >= campaign_since:
                seen_campaign = 1
                if stream_id is not None and s == stream_id:
                    seen_stream = 1
        return (
            0 if seen_global else 1,
            0 if seen_campaign else 1,
            0 if seen_stream or stream_id is None else 1,
        )
