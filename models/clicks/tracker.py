"""The click pipeline: one visit in, one decision out (stream, offer, subid, answer), one record spooled.

Every entry point that counts a click goes through `ClickTracker.track`; it is the only code that
writes a click (to the journal; the flusher lands it). Per click it looks the visitor up (geo,
device, bot: cached or ~1 µs), runs one indexed database probe (the visitor's recent clicks),
routes (models/routing/router.py), renders one URL template, and holds the journal lock for a few µs
(catch up, debounce, uniqueness flags, cap check, append). `lanner simulate` runs the same
pipeline with `dry_run`, so what it prints is what a click would get.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from peewee import Database

from models.choices import SUB_ID_SLOTS
from models.clicks.backlog import backlog_age
from models.clicks.record import (
    CAMPAIGN_ID,
    LOCATION,
    NOT_CHECKED,
    OFFER_ID,
    STREAM_ID,
    SUBID,
    USER_AGENT,
    encode_line,
    line_tail,
    new_subid,
    peek_counted,
    ua_hash,
    visitor_key,
)
from models.clicks.refusals import RefusedClicks, SpoolUnwritable
from models.clicks.spool import Journal, read_position
from models.clicks.throttledlog import ThrottledLog
from models.clicks.visitors import RecentClick, VisitorIndex
from models.lookups.bots import BotDetector
from models.lookups.geo import UNKNOWN_GEO, GeoSource
from models.lookups.useragent import UNKNOWN_DEVICE, UserAgentParser, device_type
from models.routing.caps import OFFER, STREAM, ClickCounters, CounterZones
from models.routing.config import CampaignConfig, StreamConfig, load_campaigns
from models.routing.filters import FilterSubject, parse_accept_language
from models.routing.router import History, Route, Router, TraceEntry
from models.store.sqlite import hotpath
from models.store.sqlite.meta import MetaStore
from models.tables.click import SUB_ID_COLUMNS

if TYPE_CHECKING:
    import sqlite3

logger = logging.getLogger(__name__)

# Seconds between looks at config_version and the flushed position (~30 µs): every worker holds
# every worker's clicks until the flushed position passes them, so a look every 0.25 s rather than
# every second keeps 0.75 s fewer of them (3 MB per worker at 4,000 clicks/s).
REFRESH_EVERY = 0.25
DEBOUNCE_MARGIN_MS = 500  # Memory keeps clicks this much longer than debounce needs (a clock step).
# Memory keeps an unflushed click this long before it goes to disk (~8 µs a click and worker), as
# long as before the margin above was cut (3-4 s then): a flusher a few seconds behind on a busy box
# costs no disk writes, and a stopped one holds at most 5 s of clicks in memory.
SPILL_AFTER_MS = 5000
SPILL_EVERY = 0.1  # ...while clicks too old for memory wait to move to disk (models/clicks/visitors.py).
# An unknown alias may be a campaign created a moment ago (ad networks check a URL as soon as it is
# submitted): it looks at config_version first, at most this often after a look that found no
# change, so a scan of random aliases costs a worker ~20 indexed reads a second (plus one per change).
MISS_CHECK_EVERY = 0.05
BACKLOG_CHECK_EVERY = 10.0  # Seconds between looks at the age of the oldest unflushed click...
BACKLOG_WARNING_EVERY = 60.0  # ...and between warnings while it is too old.

# What the visitor gets: a 302 (http), a page that redirects (meta, js), a page (html, blank), a 404.
ANSWERS = ("http", "meta", "js", "html", "blank", "not_found")


@dataclass
class Visit:
    """What the edge parsed from one request; strings are already valid text and bounded."""

    ip: str
    user_agent: str
    referrer: str = ""
    source: str = ""
    external_id: str = ""
    keyword: str = ""
    accept_language: str = ""
    cost: float = 0.0
    sub_ids: list[str] = field(default_factory=lambda: [""] * SUB_ID_SLOTS)
    params: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Decision:
    subid: str
    answer: str  # One of ANSWERS.
    location: str | None  # The URL for http/meta/js answers.
    body: str  # The page for an html answer.
    campaign_id: int
    stream_id: int | None
    offer_id: int | None
    is_repeat: bool  # Debounced: the subid of a click stored moments ago.
    is_unique_global: bool
    is_unique_campaign: bool
    is_unique_stream: bool
    is_bot: bool = False
    route: str = ""


@dataclass
class Simulation:
    """`lanner simulate`: the decision a click would get, and how it was reached."""

    decision: Decision
    subject: FilterSubject
    trace: list[TraceEntry]
    bot_reason: str | None


class Lookups:
    """One click's lookups that cost time (bot signatures, User-Agent parsing): done at most once,
    and on the click path only when routing or a macro needs them (`Router.route`'s `prepare`)."""

    __slots__ = ("subject", "devices", "bots", "bot_reason", "is_bot_known")

    def __init__(self, subject: FilterSubject, devices: UserAgentParser, bots: BotDetector) -> None:
        self.subject, self.devices, self.bots = subject, devices, bots
        self.bot_reason: str | None = None
        self.is_bot_known = False

    def bot(self) -> None:
        if not self.is_bot_known:
            subject = self.subject
            self.bot_reason = self.bots.reason(subject.user_agent, subject.ip)
            subject.is_bot = self.bot_reason is not None
            self.is_bot_known = True

    def device(self) -> FilterSubject:
        subject = self.subject
        if not subject.device_type:
            self.bot()
            device = self.devices.parse(subject.user_agent) if subject.user_agent else UNKNOWN_DEVICE
            subject.device_type = device_type(device, subject.is_bot)
            subject.os, subject.browser = device.os, device.browser
        return subject

    def prepare(self, campaign: CampaignConfig) -> None:
        if campaign.needs_device:
            self.device()
        elif campaign.needs_bot:
            self.bot()

    @property
    def is_bot_field(self) -> int:
        """is_bot as journaled: 0/1, or NOT_CHECKED for the flusher to decide."""
        return int(self.subject.is_bot) if self.is_bot_known else NOT_CHECKED


class MacroValues:
    """The values of a click's macros, computed only for the macros a template uses.

    PERF: a template names one to three macros; building all ~50 values per click cost ~8 µs.
    """

    __slots__ = ("subid", "route", "visit", "subject", "lookups")

    def __init__(self, subid: str, route: Route, visit: Visit, lookups: Lookups) -> None:
        self.subid, self.route, self.visit = subid, route, visit
        self.subject, self.lookups = lookups.subject, lookups

    def device(self) -> FilterSubject:
        return self.lookups.device()

    def get(self, name: str) -> str | None:
        getter = _MACRO_GETTERS.get(name)
        return getter(self) if getter is not None else None


def _sub_id_getter(index: int) -> Callable[[MacroValues], str]:
    return lambda values: values.visit.sub_ids[index]


_MACRO_GETTERS: dict[str, Callable[[MacroValues], str]] = {
    "subid": lambda v: v.subid,
    "campaign_id": lambda v: str(v.route.campaign.id),
    "campaign_name": lambda v: v.route.campaign.name,
    "stream_id": lambda v: str(v.route.stream.id) if v.route.stream else "",
    "offer_id": lambda v: str(v.route.offer.offer_id) if v.route.offer else "",
    "ip": lambda v: v.visit.ip,
    "user_agent": lambda v: v.visit.user_agent,
    "referrer": lambda v: v.visit.referrer,
    "source": lambda v: v.visit.source,
    "external_id": lambda v: v.visit.external_id,
    "keyword": lambda v: v.visit.keyword,
    "cost": lambda v: f"{v.visit.cost:g}" if v.visit.cost else "",
    "country": lambda v: v.subject.country,
    "region": lambda v: v.subject.region,
    "city": lambda v: v.subject.city,
    "device_type": lambda v: v.device().device_type,
    "os": lambda v: v.device().os,
    "browser": lambda v: v.device().browser,
    "language": lambda v: v.subject.languages[0] if v.subject.languages else "",
    # Macro names are the column names.
    **{column: _sub_id_getter(index) for index, column in enumerate(SUB_ID_COLUMNS)},
}


class VisitorHistory(History):
    """The visitor's clicks in the windows: database rows plus unflushed ones from the journal."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        probe: hotpath.VisitorProbe,
        ip: str,
        visitor_hash: int,
        rows: list[tuple],
        recent: list[tuple],
        since: Callable[[int], int],
    ) -> None:
        self.conn, self.probe, self.ip, self.visitor_hash = conn, probe, ip, visitor_hash
        # The database's rows cut at VISITOR_HISTORY_LIMIT: then each scope is asked exactly.
        self.is_truncated = len(rows) >= hotpath.VISITOR_HISTORY_LIMIT
        self.db_rows = rows
        # (campaign_id, stream_id, offer_id, created_at): journal lines not flushed yet, then the rows.
        self.rows = recent + rows if recent else rows
        self.since = since  # campaign_id -> the start of its uniqueness window (unix ms).

    def seen_in_campaign(self, campaign_id: int) -> bool:
        since = self.since(campaign_id)
        if any(c == campaign_id and created >= since for c, _, _, created in self.rows):
            return True
        if self.is_truncated:
            return bool(
                self.probe.seen(self.conn, self.ip, self.visitor_hash, 0, since, campaign_id, None)[1]
            )
        return False

    def seen_in_stream(self, stream_id: int) -> bool:
        for campaign_id, stream, _, created in self.rows:
            if stream == stream_id and created >= self.since(campaign_id):
                return True
        if self.is_truncated:
            # The stream's campaign is the one being routed; its window is the widest we asked for.
            since = min(self.since(c) for c, *_ in self.rows)
            return bool(self.probe.seen(self.conn, self.ip, self.visitor_hash, 0, since, -1, stream_id)[2])
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


class ClickTracker:
    """Per-worker state: campaign config, recent visitors, click counters, the journal handle."""

    def __init__(
        self,
        db: Database,
        *,
        spool_dir,
        segment_bytes: int,
        uniqueness_hours: float,
        debounce_seconds: float,
        backlog_alert_seconds: float = 60.0,
        geo: GeoSource | None = None,
        devices: UserAgentParser | None = None,
        bots: BotDetector | None = None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.db = db
        self.conn: sqlite3.Connection = db.connection()
        self.clock = clock
        self.geo = geo
        self.devices = devices or UserAgentParser()
        self.bots = bots or BotDetector()
        self.global_window_ms = int(uniqueness_hours * 3_600_000)
        self.debounce_ms = int(debounce_seconds * 1000)
        self.backlog_alert_seconds = backlog_alert_seconds
        self.meta = MetaStore(self.conn)
        self.config_version: str | None = None
        self.zones = CounterZones()
        self._reload_if_changed()  # The campaigns, the counter zones and the probe, in one snapshot.
        self.counters = ClickCounters()
        self.router = Router(self.counters, rng or random.Random())
        now = clock()
        # Replayed lines older than debounce go straight to disk (models/clicks/visitors.py).
        self.index = VisitorIndex(spool_dir, self._hot_after_ms(now), clock)
        # The counters and the position in one snapshot: the journal replays exactly what follows.
        with db.atomic():
            self.counters.load(self.conn, int(now * 1000))
            start = read_position(db)
        self.journal = Journal(
            spool_dir, segment_bytes, start, self._remember_line, lambda: read_position(db)
        )
        self.refusals = RefusedClicks(spool_dir)
        self._refusal_log = ThrottledLog(logger)
        self._next_refresh = now + REFRESH_EVERY
        self._next_miss_check = now
        self._next_backlog_check = now
        # Until then, clicks flushed just before this worker started are only in the database.
        self._memory_complete_ms = int(now * 1000) + self.debounce_ms + 1000

    def close(self) -> None:
        self.journal.close()
        self.refusals.close()
        self.index.close()
        if self.geo is not None:
            self.geo.close()

    def campaign(self, alias: str) -> CampaignConfig | None:
        now = self.clock()
        if now >= self._next_refresh:
            self.refresh()
        config = self.campaigns.get(alias)
        if config is None and now >= self._next_miss_check:
            if self._reload_if_changed():
                config = self.campaigns.get(alias)
            else:  # Only a look that found nothing new waits: the next change is seen at once.
                self._next_miss_check = now + MISS_CHECK_EVERY
        return config

    def refresh(self) -> None:
        """Reload changed campaigns and forget flushed clicks. Runs before any probe of a click."""
        now = self.clock()
        self._next_refresh = now + REFRESH_EVERY
        self._reload_if_changed()
        if self.geo is not None:
            self.geo.refresh()  # One stat(): a replaced geo file is used within a second.
        flushed = read_position(self.db)
        self.journal.keep_sealed_safe(flushed)  # Restores a sealed segment deleted before it landed.
        self.index.prune(flushed, self._hot_after_ms(now), int(now * 1000) - SPILL_AFTER_MS)
        if self.index.is_spilling:
            self._next_refresh = now + SPILL_EVERY
        if now >= self._next_backlog_check:
            self._warn_of_backlog(now)

    def _warn_of_backlog(self, now: float) -> None:
        """Say so in the log when the flusher is stopped, stuck or behind (one small read)."""
        self._next_backlog_check = now + BACKLOG_CHECK_EVERY
        try:
            age = backlog_age(self.db, self.journal.spool_dir, now)
        except OSError:
            return
        if age is not None and age > self.backlog_alert_seconds:
            self._next_backlog_check = now + BACKLOG_WARNING_EVERY
            logger.warning(
                "the oldest click not in the database yet is %.0f s old (%d held by this worker): "
                "is `lanner worker` running? See `lanner status`.",
                age,
                len(self.index),
            )

    def _reload_if_changed(self) -> bool:
        """Reload the campaigns if config_version moved (one indexed read); True if it did."""
        if self.meta.config_version() == self.config_version:
            return False
        # One read transaction: read piecemeal, a change committed halfway (a campaign created just
        # then) gave a campaign without its streams, answering "No offer" until the next change.
        with self.db.atomic():
            version = self.meta.config_version()
            self.campaigns = load_campaigns(self.db)
            self.zones.load(self.conn)
            self.probe = hotpath.visitor_probe(self.conn)  # Migration 0005 bumps the version to switch.
        self.campaigns_by_id = {c.id: c for c in self.campaigns.values()}
        self.config_version = version
        return True

    def _hot_after_ms(self, now: float) -> int:
        """Clicks older than this are past debounce (with a margin): memory keeps none of them."""
        return int(now * 1000) - self.debounce_ms - DEBOUNCE_MARGIN_MS

    def _count(self, stream_id: int | None, offer_id: int | None, created_at: int) -> None:
        if stream_id is not None:
            self.counters.add(STREAM, stream_id, self.zones.day(self.conn, STREAM, stream_id, created_at))
        if offer_id is not None:
            self.counters.add(OFFER, offer_id, self.zones.day(self.conn, OFFER, offer_id, created_at))

    def _remember_line(self, position: tuple[int, int], line: bytes) -> None:
        """Index and count another worker's journal line, parsing only its first fields."""
        try:
            ip, visitor_hash, created_at, campaign_id, stream_id, offer_id = peek_counted(line)
        except ValueError:
            return  # Not a click line, or a corrupt one; the flusher moves it to rejected.log.
        self.index.add(
            visitor_key(ip, visitor_hash),
            RecentClick(position, created_at, campaign_id, stream_id, offer_id, line),
        )
        self._count(stream_id, offer_id, created_at)

    def lookups(self, visit: Visit, now: float) -> Lookups:
        """What filters look at; the costly parts (bot, device) are filled in by Lookups when needed."""
        geo = self.geo.lookup(visit.ip) if self.geo is not None else UNKNOWN_GEO
        subject = FilterSubject(
            ip=visit.ip,
            user_agent=visit.user_agent,
            referrer=visit.referrer,
            keyword=visit.keyword,
            params=visit.params,
            sub_ids=visit.sub_ids,
            languages=parse_accept_language(visit.accept_language) if visit.accept_language else (),
            country=geo.country,
            region=geo.region,
            city=geo.city,
            device_type="",
            os="",
            browser="",
            is_bot=False,
            now=now,
            is_unique_campaign=True,
            seen_in_stream=lambda stream_id: False,
        )
        return Lookups(subject, self.devices, self.bots)

    def _history(
        self, campaign: CampaignConfig, ip: str, visitor_hash: int, visitor: int, now_ms: int
    ) -> VisitorHistory:
        campaigns_by_id = self.campaigns_by_id

        def since(campaign_id: int) -> int:
            config = campaigns_by_id.get(campaign_id)
            return now_ms - (config.uniqueness_ms if config is not None else campaign.uniqueness_ms)

        rows = self.probe.history(
            self.conn, ip, visitor_hash, min(now_ms - self.global_window_ms, now_ms - campaign.uniqueness_ms)
        )
        # Clicks not in the database yet (any worker's), as far as the journal has been read.
        self.journal.catch_up(is_locked=False)
        return VisitorHistory(
            self.conn, self.probe, ip, visitor_hash, rows, self.index.history(visitor), since
        )

    def track(self, campaign: CampaignConfig, visit: Visit, *, dry_run: bool = False) -> Decision:
        """The click's decision, its line in the journal first.

        Raises SpoolUnwritable when the line cannot be written (a full disk): the click is then
        counted as refused and has no subid. A repeat within the debounce window still gets its
        earlier subid, which is in the journal already.
        """
        try:
            return self._track(campaign, visit, dry_run=dry_run, trace=None)[0]
        except OSError as exc:  # Only the journal does I/O in the pipeline (SQLite raises its own).
            self.refusals.add(int(self.clock() * 1000))
            self._refusal_log(
                "the click spool %s cannot be written (%s): clicks are refused until it can",
                self.journal.spool_dir,
                exc.strerror or exc,
            )
            raise SpoolUnwritable(str(exc)) from None

    def simulate(self, campaign: CampaignConfig, visit: Visit) -> Simulation:
        """The decision for `visit` with a trace of every stream and filter; nothing is stored."""
        trace: list[TraceEntry] = []
        decision, subject, bot_reason = self._track(campaign, visit, dry_run=True, trace=trace)
        return Simulation(decision, subject, trace, bot_reason)

    def _track(
        self, campaign: CampaignConfig, visit: Visit, *, dry_run: bool, trace: list[TraceEntry] | None
    ) -> tuple[Decision, FilterSubject, str | None]:
        now = self.clock()
        now_ms = int(now * 1000)
        ip, user_agent = visit.ip, visit.user_agent
        visitor_hash = ua_hash(user_agent)
        visitor = visitor_key(ip, visitor_hash)  # Once: the index asks by it up to four times a click.
        lookups = self.lookups(visit, now)
        subject = lookups.subject
        if trace is not None:
            lookups.device()  # A simulation shows everything routing could look at (bot check included).
        history = self._history(campaign, ip, visitor_hash, visitor, now_ms)
        subject.seen_in_stream = history.seen_in_stream
        route = self.router.route(campaign, subject, history, now_ms, self.campaigns, trace, lookups.prepare)

        stored_repeat = None
        is_debounced = self.debounce_ms > 0  # 0 turns debounce off: even same-millisecond clicks count.
        if is_debounced and now_ms < self._memory_complete_ms:
            stored_repeat = self.probe.last_click(
                self.conn, ip, visitor_hash, now_ms - self.debounce_ms, campaign.id, user_agent
            )
        subid = new_subid(now_ms)
        location = self._location(route, subid, visit, lookups, now)
        # PERF: the line's tail is built before the lock, which is held only to decide and append.
        tail = None if dry_run else self._tail(subid, route, visit, lookups, location)
        debounce_since = now_ms - self.debounce_ms
        journal = self.journal
        journal.lock()
        try:
            journal.catch_up(is_locked=True)
            repeat = is_debounced and self._repeat(
                campaign, visitor, user_agent, debounce_since, stored_repeat, visit, lookups, now
            )
            if repeat:
                return repeat, subject, lookups.bot_reason
            if self._is_over_cap(route, now_ms):
                # Another worker took the last click under the cap since we routed: route again,
                # now that every click is counted (rare; only near a cap).
                route = self.router.route(
                    campaign, subject, history, now_ms, self.campaigns, trace, lookups.prepare
                )
                location = self._location(route, subid, visit, lookups, now)
                tail = None if dry_run else self._tail(subid, route, visit, lookups, location)
            stream_id = route.stream.id if route.stream else None
            offer_id = route.offer.offer_id if route.offer else None
            flags = self._uniqueness(route.campaign, history, ip, visitor_hash, visitor, now_ms, stream_id)
            if tail is not None:
                line = encode_line(ip, visitor_hash, now_ms, flags, tail)
                position = journal.append(line)
        finally:
            journal.unlock()
        if tail is not None:
            self._count(stream_id, offer_id, now_ms)  # Ours; other workers count it from the journal.
            # Kept as the line's bytes: parsed only if this visitor comes back within debounce.
            self.index.add(
                visitor, RecentClick(position, now_ms, route.campaign.id, stream_id, offer_id, line)
            )
        answer, body = self._answer(route.campaign, route.stream, location)
        decision = Decision(
            subid, answer, location, body, route.campaign.id, stream_id, offer_id, False,
            flags[0] == 1, flags[1] == 1, flags[2] == 1, subject.is_bot, route.summary,
        )  # fmt: skip
        return decision, subject, lookups.bot_reason

    @staticmethod
    def _tail(subid: str, route: Route, visit: Visit, lookups: Lookups, location: str | None) -> bytes:
        subject = lookups.subject
        texts = [
            visit.user_agent, visit.referrer, visit.source, visit.external_id, *visit.sub_ids,
            subject.country, subject.region, subject.city, subject.device_type, subject.os,
            subject.browser, subject.languages[0] if subject.languages else "", visit.keyword,
            route.summary, location or "",
        ]  # fmt: skip
        stream_id = route.stream.id if route.stream else None
        offer_id = route.offer.offer_id if route.offer else None
        return line_tail(
            subid, route.campaign.id, stream_id, offer_id, visit.cost, lookups.is_bot_field, texts
        )

    def _is_over_cap(self, route: Route, now_ms: int) -> bool:
        stream, offer = route.stream, route.offer
        if stream is None:
            return False
        if stream.is_capped(self.counters, now_ms):
            return True
        return offer is not None and offer.is_capped(self.counters, now_ms)

    def _uniqueness(
        self,
        campaign: CampaignConfig,
        history: VisitorHistory,
        ip: str,
        visitor_hash: int,
        visitor: int,
        now_ms: int,
        stream_id: int | None,
    ) -> tuple[int, int, int]:
        """The three uniqueness flags, from the database rows and every journal line (under the lock)."""
        global_since = now_ms - self.global_window_ms
        campaign_since = now_ms - campaign.uniqueness_ms
        campaign_id = campaign.id
        seen_global = seen_campaign = seen_stream = 0
        if history.is_truncated:
            seen_global, seen_campaign, seen_stream = history.probe.seen(
                self.conn, ip, visitor_hash, global_since, campaign_since, campaign_id, stream_id
            )
        # The database rows, and every journal line as read under the lock (the history's own copy
        # of the journal was taken before it).
        for c, s, _, created in history.db_rows + self.index.history(visitor):
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

    def _repeat(
        self,
        campaign: CampaignConfig,
        visitor: int,
        user_agent: str,
        debounce_since: int,
        stored_repeat: tuple | None,
        visit: Visit,
        lookups: Lookups,
        now: float,
    ) -> Decision | None:
        """The earlier decision, when the same visitor clicked this campaign moments ago (debounce)."""
        for recent in reversed(self.index.visits(visitor)):
            if recent.created_at < debounce_since:
                break
            seen = recent.record
            if seen is not None and seen[CAMPAIGN_ID] == campaign.id and seen[USER_AGENT] == user_agent:
                return self._repeat_decision(
                    campaign, seen[SUBID], seen[STREAM_ID], seen[OFFER_ID], seen[LOCATION] or None
                )
        if stored_repeat is not None:
            subid, stream_id, offer_id, _ = stored_repeat
            stream = campaign.streams.get(stream_id) if stream_id is not None else None
            if stream_id is not None and stream is None:
                return None  # The stream is gone: route afresh as a new click.
            offer = stream.offer(offer_id) if stream is not None else None
            location = self._location(Route(campaign, stream, offer), subid, visit, lookups, now)
            return self._repeat_decision(campaign, subid, stream_id, offer_id, location)
        return None

    def _repeat_decision(
        self,
        campaign: CampaignConfig,
        subid: str,
        stream_id: int | None,
        offer_id: int | None,
        location: str | None,
    ) -> Decision:
        stream = campaign.streams.get(stream_id) if stream_id is not None else None
        answer, body = self._answer(campaign, stream, location)
        return Decision(
            subid, answer, location, body, campaign.id, stream_id, offer_id, True, False, False, False
        )

    @staticmethod
    def _answer(
        campaign: CampaignConfig, stream: StreamConfig | None, location: str | None
    ) -> tuple[str, str]:
        if stream is None:
            if campaign.default_action == "blank":
                return "blank", ""
            return ("http", "") if location else ("not_found", "")
        if stream.action == "html":
            return "html", stream.payload
        if location is None:
            return "not_found", ""
        return stream.redirect_type, ""

    def _location(self, route: Route, subid: str, visit: Visit, lookups: Lookups, now: float) -> str | None:
        campaign, stream, offer = route.campaign, route.stream, route.offer
        if stream is None:
            template = campaign.default_redirect
        else:
            template = offer.template if offer else stream.redirect
        if template is None:
            return None
        values = MacroValues(subid, route, visit, lookups)
        return template.render(
            values, datetime.fromtimestamp(now, timezone.utc) if template.uses_date else None
        )
