"""The click pipeline: one visit in, one decision out (stream, offer, subid, answer), one record spooled.

Every entry point that counts a click goes through `ClickTracker.track`; it is the only code that
writes a click (to the journal; the flusher lands it). `_track` reads top to bottom, one room a step:

1. visit     what the request says (models/clicks/visit.py) and the visitor's key (record.py);
2. lookups   geo now, device and bot when routing or a macro needs them (models/clicks/enrichment.py);
             with LANNER_ANONYMIZE_IP the bot check now, then the visit keeps only the truncated
             address (models/clicks/privacy.py): macros, the line and its row never see the full one;
3. history   the visitor's recent clicks: one indexed probe of the landed ones (the database's click
             table; in cluster mode the node's own visitor file, models/store/nodevisitors.py, since
             nginx sends one visitor to one node) and the journal's unflushed lines
             (models/clicks/history.py over visitors.py); the journal's alone while the database cannot
             be read (a single PostgreSQL node's outage: the campaigns are the ones the worker holds);
4. route     the router picks the stream and the offer (models/routing/router.py);
5. decide    a new subid, the visitor's URL and answer (models/clicks/decision.py);
6. append    the line's tail built, then under the journal lock for a few µs: catch up, a repeat
             within debounce gets its earlier decision, a cap reached since routing routes again,
             the uniqueness flags (history.py), the line (record.py, spool.py). In cluster mode
             (LANNER_REDIS_URL) the route's caps are spent from the worker's leases before the line,
             Redis asked only for a new lease (models/cluster/shared_state.py); debounce and
             uniqueness are the node's own.

`lanner simulate` runs the same pipeline with `dry_run`, so what it prints is what a click would get.

The lander step: a click routed to a stream with landers goes to one of them and gets no offer
(models/routing/router.py); `lp_click` is the visitor following the lander's link to the offer. It
finds the click (the journal's unflushed lines, any worker's, held by subid in memory and, past the
newest 8,192, in a private file: models/clicks/funnels.py; then the database by its subid), chooses
the offer from the click's stream as it is now (rotation, `unvisited` from the click's visitor's
history; caps: the offer counts here, in cluster mode in Redis with the first-wins claim, `_share_lp`),
and writes an LP line to the journal before its 302, under the same lock and with the same refusal on a
full disk as a click; the flusher lands it on the click row once. A second LP click for the subid (a
reload, another worker, after a restart) finds the first one, in the journal or on the row, and gets
its offer again, writing nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from peewee import Database

from models.clicks.backlog import HEAD_BYTES, backlog_age, head_age
from models.clicks.decision import Decision, decide, render_location, repeat_of
from models.clicks.enrichment import Lookups, look_up, stored_lookups
from models.clicks.funnels import FUNNELS_IN_MEMORY, FunnelIndex
from models.clicks.history import VisitorHistory
from models.clicks.privacy import anonymized_ip
from models.clicks.record import (
    CAMPAIGN_ID,
    CREATED_AT,
    IP,
    LANDER_ID,
    LOCATION,
    LP_PREFIX,
    OFFER_ID,
    STREAM_ID,
    SUBID_PATTERN,
    UA_HASH,
    USER_AGENT,
    decode_line,
    decode_lp_line,
    encode_line,
    encode_lp_line,
    line_tail,
    new_subid,
    peek_visitor,
    ua_hash,
    visitor_key,
)
from models.clicks.refusals import RefusedClicks, SpoolUnwritable
from models.clicks.spool import Journal, read_position
from models.clicks.throttledlog import ThrottledLog
from models.clicks.visit import Visit
from models.clicks.visitors import RecentClick, VisitorIndex
from models.lookups.bots import BotDetector
from models.lookups.geo import GeoSource
from models.lookups.useragent import UserAgentParser
from models.ops.metrics import CLICK_REFUSED, CLICK_REPEAT, CLICK_STORED, unshared_counts
from models.routing.bandit import BanditShares
from models.routing.caps import OFFER, STREAM, ClickCounters, CounterZones
from models.routing.config import CampaignConfig, LanderChoice, OfferChoice, StreamConfig, load_campaigns
from models.routing.domains import DomainMap, load_domains
from models.routing.filters import FilterSubject
from models.routing.router import History, Route, Router, TraceEntry
from models.store import hotpath
from models.store.bandit import BanditStore
from models.store.clicks import ClickStore
from models.store.counters import CounterStore
from models.store.database import STORE_ERRORS, read_tx
from models.store.meta import MetaStore

if TYPE_CHECKING:
    import sqlite3

    from models.cluster.counters import SharedCounters
    from models.cluster.shared_state import Cap, SharedState
    from models.store.nodevisitors import LandedVisitors

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

# Seconds between looks at config_version and the flushed position (~30 µs): every worker holds
# every worker's clicks until the flushed position passes them, so a look every 0.25 s rather than
# every second keeps 0.75 s fewer of them (3 MB per worker at 4,000 clicks/s).
REPEATED_RECORDS = 1024  # Records of held clicks kept for repeats (~1.5 KB each).
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
# Times a click is routed again after Redis refused a cap: each refusal marks one more stream or offer
# capped, so this is only a bound; past it the click gets the campaign's default.
SHARED_REROUTES = 16
# Seconds between looks at a database that could not be read (cluster mode's PostgreSQL away): meanwhile
# clicks are routed from the campaigns the worker holds, with the visitor's history from the journal alone.
DATABASE_RETRY_EVERY = 1.0
# Seconds between looks at `bandit_version` (one indexed read): the shares of smart rotation move once a
# minute (models/reporting/bandits.py), so a worker follows within seconds without a read per refresh.
BANDIT_CHECK_EVERY = 2.0


@dataclass
class LpClick:
    """An LP click's answer: the offer chosen (None: the campaign's default) and its URL."""

    subid: str
    campaign_id: int
    offer_id: int | None
    location: str | None  # None: nothing to send the visitor to (then nothing was recorded).
    is_repeat: bool  # The subid's LP click was recorded before: its offer again, nothing written.


_NOT_STORED = object()  # No click row has the subid (None: the database could not be asked).


class _SeenOffers(History):
    """What an LP click's offer rotation asks of the visitor's history: the offers they were sent to
    through the stream (read before the journal lock; none for a `weight` rotation, which never asks)."""

    def __init__(self, offers: set[int] | None = None) -> None:
        self.offers = offers or set()

    def offers_in_stream(self, stream_id: int) -> set[int]:
        return self.offers


@dataclass
class Simulation:
    """`lanner simulate`: the decision a click would get, and how it was reached."""

    decision: Decision
    subject: FilterSubject
    trace: list[TraceEntry]
    bot_reason: str | None
    lander: LanderChoice | None = None  # The lander the click would go to (its offer: at the LP click).


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
        anonymize_ip: bool = False,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        shared: SharedState | None = None,
        counts: memoryview | None = None,
        funnels_in_memory: int = FUNNELS_IN_MEMORY,
        landed: LandedVisitors | None = None,
    ) -> None:
        self.db = db
        # Cluster mode: the visitors this node landed, in its own file (models/store/nodevisitors.py),
        # asked instead of the database for a visitor's landed clicks. None: the database is asked.
        self.landed = landed
        self._landed_log = ThrottledLog(logger, logging.WARNING, interval=60.0)
        # The worker's metric counts (models/ops/metrics.py): its shared slot under `lanner serve`.
        self.counts = unshared_counts() if counts is None else counts
        self.shared = shared  # Cluster mode's Redis; None on a single box.
        self.anonymize_ip = anonymize_ip
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
        if shared is None:
            self.counters = ClickCounters()
        else:
            from models.cluster.counters import SharedCounters

            self.counters = SharedCounters(shared)
        self.bandit = BanditShares()
        self._next_bandit_check = 0.0
        self._load_bandit(clock())
        self.router = Router(self.counters, rng or random.Random(), self.bandit)
        now = clock()
        # Replayed lines older than debounce go straight to disk (models/clicks/visitors.py).
        self.index = VisitorIndex(spool_dir, self._hot_after_ms(now), clock)
        # The counters and the position in one snapshot: the journal replays exactly what follows.
        with read_tx(db):
            self.counters.load(self.conn, int(now * 1000))
            start = read_position(db, spool_dir)
        # Unflushed clicks sent to a lander and LP clicks, every worker's, in journal order: pruned as
        # they land, the older ones on disk (models/clicks/funnels.py). Made before the journal, which
        # fills it as it reads the lines. (`funnels_in_memory` is the bound's count: a test crosses a
        # smaller one with fewer clicks.)
        self.funnels = FunnelIndex(spool_dir, clock, funnels_in_memory)
        self.journal = Journal(
            spool_dir, segment_bytes, start, self._remember_line, lambda: read_position(db, spool_dir)
        )
        self.refusals = RefusedClicks(spool_dir)
        self.refused_at = 0.0  # When a click last found the journal unwritable (`/readyz`).
        self._refusal_log = ThrottledLog(logger)
        self._database_log = ThrottledLog(logger, logging.WARNING, interval=60.0)
        self._database_retry_at = 0.0  # While the clock is before it, the database is not asked.
        self._next_refresh = now + REFRESH_EVERY
        self._next_miss_check = now
        self._next_backlog_check = now
        # Until then, clicks flushed just before this worker started are only in the database.
        self._memory_complete_ms = int(now * 1000) + self.debounce_ms + 1000
        # Held clicks' records read back for a repeat, by journal position: a visitor who keeps
        # clicking within debounce is answered from here, not by reading and parsing its line again.
        self._repeated: dict[int, list] = {}

    def close(self) -> None:
        self.journal.close()
        self.refusals.close()
        self.index.close()
        self.funnels.close()
        if self.geo is not None:
            self.geo.close()
        if self.shared is not None:
            self.shared.close()
        if self.landed is not None:
            self.landed.close()

    def campaign(self, alias: str) -> CampaignConfig | None:
        return self._find("campaigns", alias)

    def campaign_by_token(self, token: str) -> CampaignConfig | None:
        """The active campaign with this Click API token (routes/clickapi.py), found as by alias."""
        return self._find("campaigns_by_token", token)

    def _find(self, index: str, key: str) -> CampaignConfig | None:
        now = self.clock()
        if now >= self._next_refresh:
            self.refresh()
        config = getattr(self, index).get(key)
        if config is None and now >= self._next_miss_check:
            if self._database_answers(now, self._reload_if_changed):
                config = getattr(self, index).get(key)
            else:  # Only a look that found nothing new waits: the next change is seen at once.
                self._next_miss_check = now + MISS_CHECK_EVERY
        return config

    def domain_map(self, host: str) -> DomainMap:
        """The domains, fresh as the campaigns are: an unknown host may be a domain added a moment ago."""
        now = self.clock()
        if now >= self._next_refresh:
            self.refresh()
        if host not in self.domains.roots and now >= self._next_miss_check:
            if not self._database_answers(now, self._reload_if_changed):
                self._next_miss_check = now + MISS_CHECK_EVERY
        return self.domains

    def refresh(self) -> None:
        """Reload changed campaigns and forget flushed clicks. Runs before any probe of a click."""
        now = self.clock()
        self._next_refresh = now + REFRESH_EVERY
        if self.geo is not None:
            self.geo.refresh()  # One stat(): a replaced geo file is used within a second.
        self.bots.refresh()  # Likewise the crawler ranges `lanner bots update` replaces.
        if self.shared is not None:
            self.shared.check()  # A ping a second: clicks no longer tell the worker that Redis went away.
        flushed = self._database_answers(now, self._read_flushed)
        if flushed is None:
            return  # Every click is kept (the index spills to disk) until the position can be read.
        self.journal.keep_sealed_safe(flushed)  # Restores a sealed segment deleted before it landed.
        self.index.prune(flushed, self._hot_after_ms(now), int(now * 1000) - SPILL_AFTER_MS)
        self.funnels.prune(flushed)
        if self.shared is not None:  # Cluster mode: SharedCounters.
            counters = cast("SharedCounters", self.counters)
            counters.close_bucket((self.journal.segment, self.journal.offset), flushed)
        if self.index.is_spilling:
            self._next_refresh = now + SPILL_EVERY
        if now >= self._next_backlog_check:
            self._warn_of_backlog(now)

    def _read_flushed(self) -> tuple[int, int]:
        """The campaigns reloaded if changed, then the flushed position, on the process's connection
        (a new one after the server cut the last)."""
        conn = self.db.connection()
        if conn is not self.conn:
            self.conn, self.meta = conn, MetaStore(conn)
        self._reload_if_changed()
        self._load_bandit(self.clock())
        return read_position(self.db, self.journal.spool_dir)

    def _load_bandit(self, now: float) -> None:
        """The bandit streams' shares, reloaded when the refresh has moved them (at most every
        BANDIT_CHECK_EVERY)."""
        if now < self._next_bandit_check:
            return
        self._next_bandit_check = now + BANDIT_CHECK_EVERY
        version = self.meta.bandit_version()
        if version != self.bandit.version:
            store = BanditStore(self.conn)
            self.bandit.load(store.shares(), version, store.lander_shares())

    def _database_answers(self, now: float, read: Callable[[], Result]) -> Result | None:
        """`read()`, or None while the database cannot be read (then it is asked again after
        DATABASE_RETRY_EVERY): on one box SQLite always answers a read; in cluster mode PostgreSQL may be
        away (a restart, a failover), and a click must not wait for it or fail with it."""
        if now < self._database_retry_at:
            return None
        try:
            return read()
        except STORE_ERRORS as exc:
            self._database_retry_at = now + DATABASE_RETRY_EVERY
            self._database_log(
                "the database cannot be read (%s): clicks are routed from the campaigns this worker "
                "holds and wait in the spool",
                exc,
            )
            return None

    def _warn_of_backlog(self, now: float) -> None:
        """Say so in the log when the flusher is stopped, stuck or behind (one small read)."""
        self._next_backlog_check = now + BACKLOG_CHECK_EVERY
        try:
            age = self.backlog_age(now)
        except STORE_ERRORS + (OSError,):
            return
        if age is not None and age > self.backlog_alert_seconds:
            self._next_backlog_check = now + BACKLOG_WARNING_EVERY
            logger.warning(
                "the oldest click not in the database yet is %.0f s old (%d held by this worker): "
                "is `lanner worker` running? See `lanner status`.",
                age,
                len(self.index),
            )

    def backlog_age(self, now: float) -> float | None:
        """backlog_age (models/clicks/backlog.py) read on the journal's open descriptors where it can:
        /healthz asks it, and near the open-file limit opening a segment fails (EMFILE). Raises
        OSError when it had to open one and could not, and the store's errors."""
        flushed = read_position(self.db, self.journal.spool_dir)
        head = self.journal.unlanded_head(flushed, HEAD_BYTES)
        if head is None:  # A segment this worker holds no descriptor on: its file.
            return backlog_age(self.db, self.journal.spool_dir, now)
        return head_age(head, now)

    def _reload_if_changed(self) -> bool:
        """Reload the campaigns if config_version moved (one indexed read); True if it did."""
        if self.meta.config_version() == self.config_version:
            return False
        # One read transaction: read piecemeal, a change committed halfway (a campaign created just
        # then) gave a campaign without its streams, answering "No offer" until the next change.
        with read_tx(self.db):
            version = self.meta.config_version()
            self.campaigns = load_campaigns(self.db)
            self.domains: DomainMap = load_domains(self.db)
            self.zones.load(self.conn)
            self.probe = hotpath.visitor_probe(self.conn)  # Migration 0005 bumps the version to switch.
        self.campaigns_by_id = {c.id: c for c in self.campaigns.values()}
        self.campaigns_by_token = {c.token: c for c in self.campaigns.values() if c.token}
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
        if line.startswith(LP_PREFIX):
            try:
                subid, clicked_at, offer_id, location = decode_lp_line(line)
            except ValueError:
                return  # Corrupt; the flusher moves it to rejected.log.
            self.funnels.add_lp_click(subid, position, offer_id, location)
            self._count(None, offer_id, clicked_at)
            return
        try:
            key, created_at, campaign_id, stream_id, offer_id, lander_subid = peek_visitor(line)
        except ValueError:
            return  # Not a click line, or a corrupt one; the flusher moves it to rejected.log.
        self.index.add(key, RecentClick(position, created_at, campaign_id, stream_id, offer_id))
        self._count(stream_id, offer_id, created_at)
        if lander_subid is not None:
            self.funnels.add_click(lander_subid, position)

    def _held_record(self, click: RecentClick) -> list | None:
        """The held click's record, read back from the journal; None once its segment is gone."""
        record = self._repeated.get(click.position)
        if record is not None:
            return record
        line = self.journal.read_line(*click.journal_position)
        if line is None:
            return None
        try:
            record = decode_line(line)
        except ValueError:
            return None  # Corrupt past its first fields: the flusher refuses it, so it never counted.
        if record[CREATED_AT] != click.created_at or record[CAMPAIGN_ID] != click.campaign_id:
            return None  # Another file at the segment's path by now.
        if len(self._repeated) >= REPEATED_RECORDS:
            self._repeated.clear()  # Refilled at ~10 µs a repeat; only repeats ever get here.
        self._repeated[click.position] = record
        return record

    def track(self, campaign: CampaignConfig, visit: Visit, *, dry_run: bool = False) -> Decision:
        """The click's decision, its line in the journal first.

        Raises SpoolUnwritable when the line cannot be written (a full disk): the click is then
        counted as refused and has no subid. A repeat within the debounce window still gets its
        earlier subid, which is in the journal already.
        """
        return self._recorded(campaign, visit, dry_run, None)[0]

    def track_traced(self, campaign: CampaignConfig, visit: Visit) -> Simulation:
        """`track` (the click is recorded, SpoolUnwritable alike) with the trace `simulate` shows: the
        Click API's `log=1` (routes/clickapi.py)."""
        trace: list[TraceEntry] = []
        decision, subject, bot_reason = self._recorded(campaign, visit, False, trace)
        return Simulation(decision, subject, trace, bot_reason)

    def _recorded(
        self, campaign: CampaignConfig, visit: Visit, dry_run: bool, trace: list[TraceEntry] | None
    ) -> tuple[Decision, FilterSubject, str | None]:
        try:
            tracked = self._track(campaign, visit, dry_run=dry_run, trace=trace)
        except OSError as exc:  # Only the journal does I/O in the pipeline (SQLite raises its own).
            if self.shared is not None:
                self.shared.forget_last()
            self.counts[CLICK_REFUSED] += 1
            self.refused_at = self.clock()
            self.refusals.add(int(self.clock() * 1000))
            self._refusal_log(
                "the click spool %s cannot be written (%s): clicks are refused until it can",
                self.journal.spool_dir,
                exc.strerror or exc,
            )
            raise SpoolUnwritable(str(exc)) from None
        if not dry_run:
            self.counts[CLICK_REPEAT if tracked[0].is_repeat else CLICK_STORED] += 1
        return tracked

    def simulate(self, campaign: CampaignConfig, visit: Visit) -> Simulation:
        """The decision for `visit` with a trace of every stream and filter; nothing is stored."""
        trace: list[TraceEntry] = []
        decision, subject, bot_reason = self._track(campaign, visit, dry_run=True, trace=trace)
        lander = None
        if decision.lander_id is not None and decision.stream_id is not None:
            stream = self.campaigns_by_id[decision.campaign_id].streams.get(decision.stream_id)
            lander = (
                next((x for x in stream.landers if x.lander_id == decision.lander_id), None)
                if stream
                else None
            )
        return Simulation(decision, subject, trace, bot_reason, lander)

    def _track(
        self, campaign: CampaignConfig, visit: Visit, *, dry_run: bool, trace: list[TraceEntry] | None
    ) -> tuple[Decision, FilterSubject, str | None]:
        now = self.clock()
        now_ms = int(now * 1000)
        # 1. Visit: who clicked. The key once: the index asks by it up to four times a click.
        ip, user_agent = visit.ip, visit.user_agent
        visitor_hash = ua_hash(user_agent)
        visitor = visitor_key(ip, visitor_hash)

        # 2. Lookups: geo; device and bot only when routing or a macro asks (Lookups.prepare).
        lookups = look_up(visit, self.geo, self.devices, self.bots, now)
        subject = lookups.subject
        if trace is not None:
            lookups.device()  # A simulation shows everything routing could look at (bot check included).
        key_in_line = None
        if self.anonymize_ip:
            # The flusher would check the truncated address against the bot IPs: check the full one
            # now (its cost moves onto the click path). Geo and the key above had the full address.
            lookups.bot()
            visit = dataclasses.replace(visit, ip=anonymized_ip(ip))
            key_in_line = visitor  # The truncated address no longer gives it.

        # 3. History: the visitor's recent clicks, in the database and in the journal.
        history = self._history(campaign, ip, user_agent, visitor_hash, visitor, now_ms)
        subject.seen_in_stream = history.seen_in_stream

        # 4. Route: the stream and the offer.
        route = self.router.route(campaign, subject, history, now_ms, self.campaigns, trace, lookups.prepare)

        # 5. Decide: the subid, the visitor's URL and answer.
        decision = decide(route, new_subid(now_ms), visit, lookups, now)

        # 6. Append: the journal line, under the journal lock with every worker's clicks read.
        # PERF: the line's tail is built before the lock, which is held only to check and append.
        tail = None if dry_run else self._tail(decision, route, visit, lookups)
        journal = self.journal
        journal.lock()
        try:
            journal.catch_up(is_locked=True)
            if self.debounce_ms > 0:  # 0 turns debounce off: even same-millisecond clicks count.
                repeat = repeat_of(
                    campaign,
                    self.index.visits(visitor),
                    self._held_record,
                    history,
                    user_agent,
                    now_ms - self.debounce_ms,
                    visit,
                    lookups,
                    now,
                )
                if repeat is None and route.campaign.id != campaign.id:
                    # A stream sent the click on to another campaign (its `campaign` action), where it is
                    # stored and held: a repeat is found there (a double click made two clicks).
                    repeat = repeat_of(
                        route.campaign,
                        self.index.visits(visitor),
                        self._held_record,
                        history,
                        user_agent,
                        now_ms - self.debounce_ms,
                        visit,
                        lookups,
                        now,
                        self._landed_repeat(history, route.campaign.id, user_agent, now_ms),
                    )
                if repeat is not None:
                    return repeat, subject, lookups.bot_reason
            if self._is_over_cap(route, now_ms):
                # Another worker took the last click under the cap since we routed: route again,
                # now that every click is counted (rare; only near a cap).
                route = self.router.route(
                    campaign, subject, history, now_ms, self.campaigns, trace, lookups.prepare
                )
                decision = decide(route, decision.subid, visit, lookups, now)
                tail = None if dry_run else self._tail(decision, route, visit, lookups)
            if self.shared is not None and tail is not None:
                # Cluster mode: the route's caps spent from this worker's leases (Redis only for a lease).
                shared = self._share(campaign, route, decision, tail, subject, history, visit, lookups, now)
                route, decision, tail = shared
            stream_id, offer_id = decision.stream_id, decision.offer_id
            flags = history.uniqueness(
                self.index, visitor, now_ms - self.global_window_ms, route.campaign, now_ms, stream_id
            )
            if tail is not None:
                line = encode_line(visit.ip, visitor_hash, now_ms, flags, tail, key_in_line)
                position = journal.append(line)
        finally:
            journal.unlock()
        if tail is not None:
            if self.shared is not None:  # Its line written: the lease units it spent are spent for good.
                self.shared.settle()
                if decision.lander_id is not None:  # Its LP click may come in on another node.
                    self.shared.share_click_line(decision.subid, line)
            self._count(stream_id, offer_id, now_ms)  # Ours; other workers count it from the journal.
            if decision.lander_id is not None:
                self.funnels.add_click(decision.subid, position)
            # The line is read back from the journal only if this visitor comes back within debounce.
            self.index.add(visitor, RecentClick(position, now_ms, route.campaign.id, stream_id, offer_id))
        decision.is_unique_global = flags[0] == 1
        decision.is_unique_campaign = flags[1] == 1
        decision.is_unique_stream = flags[2] == 1
        return decision, subject, lookups.bot_reason

    def _share(
        self,
        campaign: CampaignConfig,
        route: Route,
        decision: Decision,
        tail: bytes,
        subject: FilterSubject,
        history: VisitorHistory,
        visit: Visit,
        lookups: Lookups,
        now: float,
    ) -> tuple[Route, Decision, bytes]:
        """The route's caps spent from this worker's leases (models/cluster/shared_state.py `count`):
        Redis is asked only for a lease; a cap full across the nodes (or one the leases do not hold
        while Redis is away) marks it capped and the click is routed again. (route, decision, tail)."""
        from models.cluster.shared_state import Alone, Counted, Refused

        shared, counters = self.shared, cast("SharedCounters", self.counters)  # Cluster mode only.
        assert shared is not None
        now_ms = int(now * 1000)
        for _ in range(SHARED_REROUTES):
            caps = self._caps_of(route, now_ms)
            answer = shared.count(caps, self._seed_count, now_ms)
            if isinstance(answer, Counted):
                _learn(counters, caps, answer.counts)
                return route, decision, tail
            if isinstance(answer, Alone):  # Redis is away; the leases hold the route's caps (if any).
                return route, decision, tail
            if isinstance(answer, Refused):
                _learn(counters, caps, answer.counts)
            # A cap is full across nodes (or Redis is away, and the counters now refuse every cap the
            # leases do not hold).
            route = self.router.route(
                campaign, subject, history, now_ms, self.campaigns, None, lookups.prepare
            )
            decision = decide(route, decision.subid, visit, lookups, now)
            tail = self._tail(decision, route, visit, lookups)
            if answer is None and shared.spend_leased(self._caps_of(route, now_ms)):
                return route, decision, tail
        route = Route(campaign, None, None, [])  # Refused every time: no stream, no cap.
        decision = decide(route, decision.subid, visit, lookups, now)
        return route, decision, self._tail(decision, route, visit, lookups)

    @staticmethod
    def _caps_of(route: Route, now_ms: int) -> list[Cap]:
        """The cap counters a click of the route passes in Redis: its stream's and its offer's."""
        from models.cluster.shared_state import Cap

        caps = []
        stream, offer = route.stream, route.offer
        for scope, item, ref in (
            (STREAM, stream, stream.id if stream is not None else 0),
            (OFFER, offer, offer.offer_id if offer is not None else 0),
        ):
            if item is None or (item.daily_cap is None and item.total_cap is None):
                continue
            if item.daily_cap is not None:
                caps.append(Cap(scope, ref, item.days.day(now_ms), item.daily_cap))
            if item.total_cap is not None:
                caps.append(Cap(scope, ref, None, item.total_cap))
        return caps

    def _seed_count(self, cap: Cap) -> int:
        """Where a cap counter Redis lacks starts: the database's landed clicks and this node's unlanded
        ones (counted by its buckets against the flushed position read in the same snapshot)."""
        with read_tx(self.db):
            store = CounterStore(self.conn)
            if cap.day is None:
                landed = sum(n for scope, ref, n in store.totals() if scope == cap.scope and ref == cap.ref)
            else:
                landed = sum(
                    n
                    for scope, ref, day, n in store.days_since(cap.day)
                    if scope == cap.scope and ref == cap.ref and day == cap.day
                )
            flushed = read_position(self.db, self.journal.spool_dir)
        counters = cast("SharedCounters", self.counters)  # Only Redis's seeding asks.
        counters.close_bucket((self.journal.segment, self.journal.offset), flushed)
        return landed + counters.unlanded(cap.scope, cap.ref, cap.day)

    def _history(
        self, campaign: CampaignConfig, ip: str, user_agent: str, visitor_hash: int, visitor: int, now_ms: int
    ) -> VisitorHistory:
        """The visitor's clicks in the windows: one indexed probe, then the journal's unflushed lines."""
        campaigns_by_id = self.campaigns_by_id

        def since(campaign_id: int) -> int:
            config = campaigns_by_id.get(campaign_id)
            return now_ms - (config.uniqueness_ms if config is not None else campaign.uniqueness_ms)

        # Cluster mode: the node's own file of the visitors it landed (nginx sends one visitor to one
        # node); else the database's click table.
        conn, probe = self.conn, self.probe
        if self.landed is not None:
            conn, probe = self.landed.conn, self.landed.probe
        probed = probe.visitor(ip, visitor_hash, visitor)

        def landed() -> tuple[list[tuple], tuple | None]:
            since_ms = min(now_ms - self.global_window_ms, now_ms - campaign.uniqueness_ms)
            rows = probe.history(conn, probed, since_ms)
            if self.debounce_ms > 0 and now_ms < self._memory_complete_ms:
                # A worker that started moments ago holds no click flushed before it did: ask the database.
                repeat_since = now_ms - self.debounce_ms
                return rows, probe.last_click(conn, probed, repeat_since, campaign.id, user_agent)
            return rows, None

        if self.landed is not None:
            rows, stored_repeat = self._node_file_answers(landed)
        else:
            # Without the database, the journal's clicks alone: a visitor's landed clicks count as unseen.
            rows, stored_repeat = self._database_answers(now_ms / 1000, landed) or ([], None)
        # Clicks not in the database yet (any worker's), as far as the journal has been read.
        self.journal.catch_up(is_locked=False)
        return VisitorHistory(conn, probe, probed, rows, self.index.history(visitor), since, stored_repeat)

    def _node_file_answers(
        self, read: Callable[[], tuple[list[tuple], tuple | None]]
    ) -> tuple[list[tuple], tuple | None]:
        """`read()` of the node's visitor file; no landed click if it cannot be read (a damaged file):
        the visitor's landed clicks count as unseen (the journal's still count)."""
        from models.store.nodevisitors import NODE_VISITOR_ERRORS

        try:
            return read()
        except NODE_VISITOR_ERRORS as error:
            self._landed_log("the node's visitor file cannot be read (%s): visitors count as unseen", error)
            return [], None

    def _landed_repeat(
        self, history: VisitorHistory, campaign_id: int, user_agent: str, now_ms: int
    ) -> tuple | None:
        """The visitor's click in the campaign within debounce that only the database has, asked as
        `_history` asks it for the click's own campaign: only while this worker is new (its memory
        holds no click flushed before it started). PERF: under the journal lock, but only then and
        only for a click sent on to another campaign."""
        if now_ms >= self._memory_complete_ms:
            return None
        read = lambda: history.landed_repeat(now_ms - self.debounce_ms, campaign_id, user_agent)  # noqa: E731
        if self.landed is not None:
            return self._node_file_answers(lambda: ([], read()))[1]
        return self._database_answers(now_ms / 1000, read)

    @staticmethod
    def _tail(decision: Decision, route: Route, visit: Visit, lookups: Lookups) -> bytes:
        subject = lookups.subject
        texts = [
            visit.user_agent,
            visit.referrer,
            visit.source,
            visit.external_id,
            *visit.sub_ids,
            subject.country,
            subject.region,
            subject.city,
            subject.device_type,
            subject.os,
            subject.browser,
            subject.languages[0] if subject.languages else "",
            visit.keyword,
            decision.route,
            decision.location or "",
        ]
        return line_tail(
            decision.subid,
            route.campaign.id,
            decision.stream_id,
            decision.offer_id,
            visit.cost,
            lookups.is_bot_field,
            texts,
            decision.lander_id,
            visit.domain,
        )

    def _is_over_cap(self, route: Route, now_ms: int) -> bool:
        stream, offer = route.stream, route.offer
        if stream is None:
            return False
        if stream.is_capped(self.counters, now_ms):
            return True
        return offer is not None and offer.is_capped(self.counters, now_ms)

    def lp_click(self, subid: str) -> LpClick | None:
        """The visitor left the lander of click `subid` for the offer: the offer chosen now, its LP
        line in the journal first (see the module doc). None for a subid of no click sent to a lander
        (or of a campaign no longer active): nothing is written.

        Raises SpoolUnwritable when the line cannot be written (a full disk), as `track` does.
        """
        if not SUBID_PATTERN.match(subid):
            return None
        try:
            return self._lp_click(subid)
        except OSError as exc:  # Only the journal does I/O here.
            self.counts[CLICK_REFUSED] += 1
            self.refused_at = self.clock()
            self.refusals.add(int(self.clock() * 1000))
            self._refusal_log(
                "the click spool %s cannot be written (%s): clicks are refused until it can",
                self.journal.spool_dir,
                exc.strerror or exc,
            )
            raise SpoolUnwritable(str(exc)) from None

    def _lp_click(self, subid: str) -> LpClick | None:
        now = self.clock()
        now_ms = int(now * 1000)
        if now >= self._next_refresh:
            self.refresh()  # Prunes what landed before the database is asked below.
        journal = self.journal
        journal.catch_up(is_locked=False)
        done = self.funnels.lp_click(subid)
        record = None
        position = self.funnels.click(subid)
        if position is not None:
            record = self._held_lander_record(subid, position)
        if record is None:
            row = self._database_answers(now, lambda: self._stored_lander_click(subid))
            if row is None or row is _NOT_STORED:
                record = self._shared_lander_record(subid)
                if record is None:
                    return None
                row = (record, None)
            record, lp_clicked_at = row
            if lp_clicked_at is not None and done is None:
                campaign = self.campaigns_by_id.get(record[CAMPAIGN_ID])
                location = self._offer_location(campaign, record, record[OFFER_ID], now)
                return LpClick(subid, record[CAMPAIGN_ID], record[OFFER_ID], location, True)
        if record[LANDER_ID] is None:
            return None  # A click sent straight to its offer: it has no LP click.
        if done is not None:
            return LpClick(subid, record[CAMPAIGN_ID], done[1], done[2] or None, True)
        campaign = self.campaigns_by_id.get(record[CAMPAIGN_ID])
        if campaign is None:
            return None
        stream = campaign.streams.get(record[STREAM_ID])
        seen = self._seen_offers(campaign, stream, record, now_ms)
        offer = self._lp_offer(stream, seen, now_ms)
        journal.lock()
        try:
            journal.catch_up(is_locked=True)
            done = self.funnels.lp_click(subid)
            if done is not None:  # Another worker's LP click for it, a moment ago.
                return LpClick(subid, campaign.id, done[1], done[2] or None, True)
            if offer is not None and offer.is_capped(self.counters, now_ms):
                # Another worker took the last one under the cap.
                offer = self._lp_offer(stream, seen, now_ms)
            offer_id = offer.offer_id if offer is not None else None
            location = self._offer_location(campaign, record, offer_id, now)
            if location is not None and self.shared is not None:
                # Cluster mode: the first LP click of the subid across the nodes, and the offer's caps
                # counted in Redis, in one round trip; before the line, given back if it is not written.
                answer = self._share_lp(subid, campaign, record, stream, offer, seen, now)
                if isinstance(answer, LpClick):
                    return answer
                offer_id, location = answer
            if location is None:
                return LpClick(subid, campaign.id, None, None, False)  # Nowhere to go: nothing recorded.
            try:
                position = journal.append(encode_lp_line(subid, now_ms, offer_id, location))
            except OSError:
                if self.shared is not None:
                    self.shared.release_lp()
                raise
        finally:
            journal.unlock()
        self.funnels.add_lp_click(subid, position, offer_id, location)
        self._count(None, offer_id, now_ms)
        return LpClick(subid, campaign.id, offer_id, location, False)

    def _lp_offer(self, stream: StreamConfig | None, seen: _SeenOffers, now_ms: int) -> OfferChoice | None:
        return self.router.choose_offer(stream, seen, now_ms) if stream is not None else None

    def _seen_offers(
        self, campaign: CampaignConfig, stream: StreamConfig | None, record: list, now_ms: int
    ) -> _SeenOffers:
        """For an `unvisited` rotation: the offers the click's visitor (its key, as routing had it) was
        sent to through the stream in the campaign's window: their clicks' (database and journal), and
        the LP clicks of their held clicks sent to a lander, whose LP lines have not landed yet. Not
        seen: an unlanded LP click whose click has landed or gone to disk already (a visitor through two
        funnels within the flusher's lag), or that another node wrote (cluster mode)."""
        if stream is None or stream.offer_rotation != "unvisited" or len(stream.offers) < 2:
            return _SeenOffers()
        ip, user_agent, hashed = record[IP], record[USER_AGENT], record[UA_HASH]
        key = record[LOCATION + 1] if len(record) > LOCATION + 1 else None  # A journal line's own key.
        if key is None:
            key = visitor_key(ip, hashed)
        offers = set(self._history(campaign, ip, user_agent, hashed, key, now_ms).offers_in_stream(stream.id))
        since = now_ms - campaign.uniqueness_ms
        for click in self.index.visits(key):
            if click.stream_id == stream.id and click.offer_id is None and click.created_at >= since:
                held = self._held_record(click)
                done = self.funnels.lp_click(held[0]) if held is not None else None
                if done is not None and done[1] is not None:
                    offers.add(done[1])
        return _SeenOffers(offers)

    def _share_lp(
        self,
        subid: str,
        campaign: CampaignConfig,
        record: list,
        stream: StreamConfig | None,
        offer: OfferChoice | None,
        seen: _SeenOffers,
        now: float,
    ) -> tuple[int | None, str | None] | LpClick:
        """Ask Redis about the LP click (models/cluster/shared_state.py `claim_lp`): another node's first
        LP click of the subid, or (offer_id, location) to write. A cap full across nodes marks the offer
        capped and the offer is chosen again; with Redis away, as at a click (`_share`): an offer without
        a cap goes on, a capped one is chosen again from the counters, which then refuse every cap."""
        from models.cluster.shared_state import Alone, Claimed, Refused

        shared, counters = self.shared, cast("SharedCounters", self.counters)  # Cluster mode only.
        assert shared is not None
        now_ms = int(now * 1000)
        for attempt in range(SHARED_REROUTES + 1):
            if attempt == SHARED_REROUTES:
                offer = None  # Refused every time: the campaign's default, no cap.
            offer_id = offer.offer_id if offer is not None else None
            location = self._offer_location(campaign, record, offer_id, now)
            if location is None:
                return offer_id, None
            caps = self._caps_of(Route(campaign, None, offer), now_ms)
            answer = shared.claim_lp(subid, offer_id, location, caps, self._seed_count)
            if isinstance(answer, Claimed):
                _learn(counters, caps, answer.counts)
                return offer_id, location
            if isinstance(answer, tuple):  # Another node's LP click of the subid was first.
                return LpClick(subid, campaign.id, answer[0], answer[1] or None, True)
            if isinstance(answer, Alone):  # Redis is away; the leases hold the offer's caps (if any).
                return offer_id, location
            if isinstance(answer, Refused):
                _learn(counters, caps, answer.counts)
            offer = self._lp_offer(stream, seen, now_ms)
            if answer is None:  # Redis away: the counters refuse every capped offer the leases do not hold.
                offer_id = offer.offer_id if offer is not None else None
                if shared.spend_leased(self._caps_of(Route(campaign, None, offer), now_ms), is_lp=True):
                    return offer_id, self._offer_location(campaign, record, offer_id, now)
        raise AssertionError("unreachable: the last attempt has no cap to refuse")

    def stop(self) -> None:
        """A clean stop of the worker: cluster mode gives its unspent cap lease units back."""
        if self.shared is not None:
            self.shared.give_back()

    def _held_lander_record(self, subid: str, position: tuple[int, int]) -> list | None:
        line = self.journal.read_line(*position)
        if line is None:
            return None  # Its segment landed and is gone: the database has it.
        try:
            record = decode_line(line)
        except ValueError:
            return None
        return record if record[0] == subid else None

    def _stored_lander_click(self, subid: str):
        """(record, lp_clicked_at) of a landed click, or _NOT_STORED; by the unique subid index."""
        with read_tx(self.db):
            row = ClickStore(self.conn).lander_click(subid)
        if row is None:
            return _NOT_STORED
        *columns, key, lp_clicked_at = row
        return [*columns, None, key], lp_clicked_at  # A decoded line's shape: no Location, its key.

    def _shared_lander_record(self, subid: str) -> list | None:
        """Cluster mode: the record of a click another node sent to a lander and has not landed yet."""
        if self.shared is None:
            return None
        line = self.shared.shared_click_line(subid)
        if line is None:
            return None
        try:
            record = decode_line(line)
        except ValueError:
            return None
        return record if record[0] == subid else None

    def _offer_location(
        self, campaign: CampaignConfig | None, record: list, offer_id: int | None, now: float
    ):
        """The URL of the offer chosen at the LP click, rendered with the click's macro values; the
        campaign's default when the stream (or the offer) is gone or has none now."""
        if campaign is None:
            return None
        stream = campaign.streams.get(record[STREAM_ID])
        offer = stream.offer(offer_id) if stream is not None and offer_id is not None else None
        route = Route(campaign, stream, offer) if offer is not None else Route(campaign, None, None)
        visit, lookups = stored_lookups(record, self.devices, self.bots, now)
        return render_location(route, record[0], visit, lookups, now)


def _learn(counters: SharedCounters, caps: list[Cap], counts: tuple[int, ...]) -> None:
    """Note what Redis counts as taken of the caps it was asked about (-1: not asked)."""
    for cap, count in zip(caps, counts, strict=True):
        if count >= 0:
            counters.learn(cap.scope, cap.ref, cap.day, count, cap.cap)
