"""The click pipeline: one visit in, one decision out (stream, offer, subid, Location), one record spooled.

Every entry point that counts a click goes through `ClickTracker.track`; it is the only code that
writes a click (to the journal; the flusher lands it). Per click it runs one indexed database
probe (uniqueness), holds the journal lock for a few µs (catch up, decide, append) and renders
one URL template.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from peewee import Database

from models import hotpath
from models.click import SUB_ID_COLUMNS, SUB_ID_SLOTS
from models.record import (
    CAMPAIGN_ID,
    LOCATION,
    OFFER_ID,
    STREAM_ID,
    SUBID,
    USER_AGENT,
    encode_line,
    line_tail,
    new_subid,
    peek_line,
    ua_hash,
)
from models.routing import CampaignConfig, OfferChoice, StreamConfig, load_campaigns
from models.spool import Journal, read_position
from models.visitors import RecentClick, VisitorIndex

logger = logging.getLogger(__name__)

REFRESH_EVERY = 1.0  # Seconds between looks at config_version and the flushed position.
BACKLOG_WARNING = 500_000  # Clicks held in memory before a worker warns that the flusher is behind.


@dataclass
class Visit:
    """What the edge parsed from one request; strings are already valid text and bounded."""

    ip: str
    user_agent: str
    referrer: str = ""
    source: str = ""
    external_id: str = ""
    cost: float = 0.0
    sub_ids: list[str] = field(default_factory=lambda: [""] * SUB_ID_SLOTS)
    is_bot: bool = False


@dataclass(frozen=True)
class Decision:
    subid: str
    location: str | None  # None: the stream's action (or no stream) answers 404.
    stream_id: int | None
    offer_id: int | None
    is_repeat: bool  # Debounced: the subid of a click stored moments ago.
    is_unique_global: bool
    is_unique_campaign: bool
    is_unique_stream: bool


class ClickTracker:
    """Per-worker state: campaign config, recent visitors, the journal handle."""

    def __init__(
        self,
        db: Database,
        *,
        spool_dir,
        segment_bytes: int,
        uniqueness_hours: float,
        debounce_seconds: float,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.conn: sqlite3.Connection = db.connection()
        self.clock = clock
        self.rng = rng or random.Random()
        self.global_window_ms = int(uniqueness_hours * 3_600_000)
        self.debounce_ms = int(debounce_seconds * 1000)
        self.config_version = hotpath.config_version(self.conn)
        self.campaigns: dict[str, CampaignConfig] = load_campaigns(db)
        self.index = VisitorIndex()
        self.journal = Journal(spool_dir, segment_bytes, read_position(db), self._remember_line)
        now = clock()
        self._next_refresh = now + REFRESH_EVERY
        self._next_backlog_warning = now
        # Until then, clicks flushed just before this worker started are only in the database.
        self._memory_complete_ms = int(now * 1000) + self.debounce_ms + 1000

    def close(self) -> None:
        self.journal.close()

    def campaign(self, alias: str) -> CampaignConfig | None:
        if self.clock() >= self._next_refresh:
            self.refresh()
        return self.campaigns.get(alias)

    def refresh(self) -> None:
        """Reload changed campaigns and forget flushed clicks. Runs before any probe of a click."""
        now = self.clock()
        self._next_refresh = now + REFRESH_EVERY
        version = hotpath.config_version(self.conn)
        if version != self.config_version:
            self.campaigns = load_campaigns(self.db)
            self.config_version = version
        flushed = read_position(self.db)
        self.index.prune(flushed, int(now * 1000) - self.debounce_ms - 1000)
        if len(self.index) > BACKLOG_WARNING and now >= self._next_backlog_warning:
            # Unflushed clicks are held here until they land: memory grows while the flusher is away.
            self._next_backlog_warning = now + 60
            logger.warning(
                "%d clicks are not in the database yet; is `lanner worker` running?", len(self.index)
            )

    def _remember_line(self, position: tuple[int, int], line: bytes) -> None:
        """Index another worker's journal line by visitor, unparsed."""
        try:
            ip, visitor_hash, created_at = peek_line(line)
        except ValueError:
            return  # Not a click line; the flusher moves it to rejected.log.
        self.index.add(ip, visitor_hash, RecentClick(position, created_at, None, line))

    def track(self, campaign: CampaignConfig, visit: Visit) -> Decision:
        now = self.clock()
        now_ms = int(now * 1000)
        ip, user_agent = visit.ip, visit.user_agent
        visitor_hash = ua_hash(user_agent)
        stream = campaign.choose_stream(self.rng)
        stream_id = stream.id if stream else None
        offer = stream.choose_offer(self.rng) if stream and stream.action == "offers" else None
        offer_id = offer.offer_id if offer else None

        global_since = now_ms - self.global_window_ms
        campaign_since = now_ms - campaign.uniqueness_ms
        seen_global, seen_campaign, seen_stream = hotpath.visitor_seen(
            self.conn, ip, visitor_hash, global_since, campaign_since, campaign.id, stream_id
        )
        stored_repeat = None
        if now_ms < self._memory_complete_ms:
            stored_repeat = hotpath.last_click(
                self.conn, ip, visitor_hash, now_ms - self.debounce_ms, campaign.id, user_agent
            )

        subid = new_subid(now_ms)
        location = self._location(campaign, stream, offer, subid, visit, now)
        texts = [user_agent, visit.referrer, visit.source, visit.external_id, *visit.sub_ids, location or ""]
        tail = line_tail(subid, campaign.id, stream_id, offer_id, visit.cost, visit.is_bot, texts)
        debounce_since = now_ms - self.debounce_ms
        campaign_id = campaign.id
        journal = self.journal
        journal.catch_up(is_locked=False)
        journal.lock()
        try:
            journal.catch_up(is_locked=True)
            for recent in reversed(self.index.visits(ip, visitor_hash)):
                if recent.created_at < campaign_since and recent.created_at < global_since:
                    break  # Older than both windows, like everything before it.
                seen = recent.record
                if seen is None:
                    continue
                if seen[CAMPAIGN_ID] == campaign_id:
                    if recent.created_at >= debounce_since and seen[USER_AGENT] == user_agent:
                        return Decision(
                            seen[SUBID], seen[LOCATION] or None, seen[STREAM_ID], seen[OFFER_ID],
                            True, False, False, False,
                        )  # fmt: skip
                    if recent.created_at >= campaign_since:
                        seen_campaign = 1
                        if stream_id is not None and seen[STREAM_ID] == stream_id:
                            seen_stream = 1
                if recent.created_at >= global_since:
                    seen_global = 1
            if stored_repeat is not None:
                repeat = self._stored_repeat(campaign, stored_repeat, visit, now)
                if repeat is not None:
                    return repeat
            flags = (
                0 if seen_global else 1,
                0 if seen_campaign else 1,
                0 if seen_stream or stream_id is None else 1,
            )
            line = encode_line(ip, visitor_hash, now_ms, flags, tail)
            position = journal.append(line)
        finally:
            journal.unlock()
        # Kept as bytes: not tracked by the GC, and parsed only if this visitor comes back.
        self.index.add(ip, visitor_hash, RecentClick(position, now_ms, None, line))
        is_unique_global, is_unique_campaign, is_unique_stream = flags
        return Decision(
            subid, location, stream_id, offer_id, False,
            is_unique_global == 1, is_unique_campaign == 1, is_unique_stream == 1,
        )  # fmt: skip

    def _location(
        self,
        campaign: CampaignConfig,
        stream: StreamConfig | None,
        offer: OfferChoice | None,
        subid: str,
        visit: Visit,
        now: float,
    ) -> str | None:
        if stream is None:
            return None
        template = offer.template if offer else stream.redirect
        if template is None:
            return None
        values = {
            "subid": subid,
            "campaign_id": str(campaign.id),
            "campaign_name": campaign.name,
            "stream_id": str(stream.id),
            "offer_id": str(offer.offer_id) if offer else "",
            "ip": visit.ip,
            "user_agent": visit.user_agent,
            "referrer": visit.referrer,
            "source": visit.source,
            "external_id": visit.external_id,
            "cost": f"{visit.cost:g}" if visit.cost else "",
        }
        values.update(zip(SUB_ID_COLUMNS, visit.sub_ids))  # Macro names are the column names.
        return template.render(
            values, datetime.fromtimestamp(now, timezone.utc) if template.uses_date else None
        )

    def _stored_repeat(
        self, campaign: CampaignConfig, row: tuple, visit: Visit, now: float
    ) -> Decision | None:
        """A repeat of a click flushed before this worker started: same subid, same stream/offer."""
        subid, stream_id, offer_id, _ = row
        stream = next(
            (s for s in campaign.intercepting + campaign.regular + campaign.fallback if s.id == stream_id),
            None,
        )
        offer = next((o for o in stream.offers if o.offer_id == offer_id), None) if stream else None
        if stream_id is not None and stream is None:
            return None  # The stream is gone: route afresh as a new click.
        location = self._location(campaign, stream, offer, subid, visit, now)
        return Decision(subid, location, stream_id, offer_id, True, False, False, False)
