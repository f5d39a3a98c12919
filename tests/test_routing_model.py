"""Routing against a reference model: a Hypothesis state machine over a real database, journal and
tracker(s), with a clock the test moves.

The machine creates campaigns, streams (filters, click caps; some sending the click on to an older
campaign) and offers (caps, shared between streams), sends clicks from a small pool of visitors (IP,
User-Agent, country from a geo file written here, query parameters) through one of two in-process
workers, moves the clock (across debounce, the uniqueness windows and midnight), flushes the spool and
restarts a worker. After every click the
tracker's decision is compared with `Model`, a few dozen lines written from docs/campaigns.md and
docs/clicks.md and sharing no code with models/routing/ or models/clicks/:

- the stream is the first matching one (intercepting, regular by position, fallback; a stream that is
  capped, whose filters fail or whose offers are all capped does not match; none: the default);
- a stream sending the click to another campaign routes it there, where it is stored;
- a repeat of the same IP + UA on the campaign within debounce gets the earlier subid, records nothing
  (the campaign clicked, or the one the click is stored in);
- the uniqueness flags are "not seen within the window": global (LANNER_UNIQUENESS_HOURS), campaign and
  stream (the campaign's window);
- a cap is never exceeded and is reached exactly (the stream or offer is skipped only once full).

After a flush each recorded click's row (stream, offer, flags) and the cap counters equal the model's.

Bounded and reproducible for CI (derandomized, no example database); LANNER_FUZZ_EXAMPLES=N runs N
examples (the bench's longer run).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from models.admin.services import add_stream, archive_campaign, create_campaign, create_offer, update_stream
from models.clicks.spool import flush_spool
from models.clicks.tracker import ClickTracker
from models.clicks.visit import Visit
from models.lookups.geo import GeoSource

EXAMPLES = int(os.environ.get("LANNER_FUZZ_EXAMPLES", "0")) or 60
STEPS = 40
GLOBAL_HOURS = 1.5
DEBOUNCE_S = 2
DAY_MS = 86_400_000

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36"
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1"
)
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
# A visitor's country, as the geo file below says: 10.1/16 US, 10.2/16 DE, anything else unknown.
COUNTRIES = {"10.1.0.1": "US", "10.1.0.2": "US", "10.2.0.1": "DE", "10.3.0.1": "", "2001:db8::1": ""}
USER_AGENTS = {CHROME: False, IPHONE: False, GOOGLEBOT: True, "": True}  # ...and whether it is a bot.

# Filters as (expression, kind, argument, negate); Model.passes reads the last three.
FILTERS = [
    ("param.p=a,b", "param_in", {"a", "b"}, False),
    ("param.p!=a", "param_in", {"a"}, True),
    ("param.p~b", "param_has", "b", False),
    ("param.p=", "param_in", {""}, False),
    ("sub_id_1~x", "sub1_has", "x", False),
    ("country=US", "country", {"US"}, False),
    ("country!=DE", "country", {"DE"}, True),
    ("country=unknown", "country", {""}, False),
    ("ip=10.1.0.0/16", "ip16", "10.1.", False),
    ("bot=yes", "bot", True, False),
    ("bot=no", "bot", False, False),
    ("unique=campaign", "unique_campaign", None, False),
    ("unique!=campaign", "unique_campaign", None, True),
    ("unique=stream", "unique_stream", None, False),
    ("unique!=stream", "unique_stream", None, True),
]
ADVANCES = [0.0, 0.4, 1.999, 2.0, 2.001, 59.0, 1800.0, 3600.0, 5400.0, 7200.0, 21_600.0, 86_400.0]
TYPES = ("intercepting", "regular", "fallback")


@dataclass
class Stream:
    id: int
    campaign: int
    type: str
    offer: int | None  # None: it sends the click on to the campaign `target` (its `campaign` action).
    filters: list = field(default_factory=list)
    mode: str = "and"
    daily_cap: int | None = None
    total_cap: int | None = None
    target: int | None = None


@dataclass
class Click:
    at: int
    visitor: tuple[str, str]
    campaign: int
    stream: int | None
    offer: int | None
    subid: str
    flags: tuple[bool, bool, bool]


class Model:
    """What docs/campaigns.md and docs/clicks.md say a click gets; time in unix ms."""

    def __init__(self) -> None:
        self.windows: dict[int, int] = {}  # campaign -> its uniqueness window (ms)
        self.streams: list[Stream] = []  # in creation order (= position within a type)
        self.offer_caps: dict[int, tuple[int | None, int | None]] = {}  # offer -> (daily, total)
        self.clicks: list[Click] = []

    def seen(self, visitor, now, window, campaign=None, stream=None) -> bool:
        return any(
            c.visitor == visitor
            and c.at >= now - window
            and (campaign is None or c.campaign == campaign)
            and (stream is None or c.stream == stream)
            for c in self.clicks
        )

    def is_full(self, daily, total, clicks, now) -> bool:
        today = [c for c in clicks if c.at // DAY_MS == now // DAY_MS]
        return (total is not None and len(clicks) >= total) or (daily is not None and len(today) >= daily)

    def passes(self, kind, argument, visitor, params, stream, now) -> bool:
        ip, ua = visitor
        window = self.windows[stream.campaign]
        return {
            "param_in": lambda: params.get("p", "").lower() in argument,
            "param_has": lambda: argument in params.get("p", "").lower(),
            "sub1_has": lambda: argument in params.get("sub1", "").lower(),
            "country": lambda: COUNTRIES[ip] in argument,
            "ip16": lambda: ip.startswith(argument),
            "bot": lambda: USER_AGENTS[ua] == argument,
            "unique_campaign": lambda: not self.seen(visitor, now, window, campaign=stream.campaign),
            "unique_stream": lambda: not self.seen(visitor, now, window, stream=stream.id),
        }[kind]()

    def matches(self, stream: Stream, visitor, params, now) -> bool:
        if self.is_full(
            stream.daily_cap, stream.total_cap, [c for c in self.clicks if c.stream == stream.id], now
        ):
            return False
        verdicts = [self.passes(k, a, visitor, params, stream, now) != neg for _, k, a, neg in stream.filters]
        if verdicts and not (all(verdicts) if stream.mode == "and" else any(verdicts)):
            return False
        if stream.offer is None:
            return True
        daily, total = self.offer_caps[stream.offer]
        return not self.is_full(daily, total, [c for c in self.clicks if c.offer == stream.offer], now)

    def route(self, campaign: int, visitor, params, now) -> tuple[int, Stream | None]:
        """(campaign, stream): the first matching stream; one that sends the click on to another campaign
        routes there (the test's targets are older campaigns, so there is no loop)."""
        while True:
            ordered = sorted(
                (s for s in self.streams if s.campaign == campaign), key=lambda s: TYPES.index(s.type)
            )
            stream = next((s for s in ordered if self.matches(s, visitor, params, now)), None)
            if stream is None or stream.target is None:
                return campaign, stream
            campaign = stream.target

    def click(self, entry: int, visitor, params, now) -> tuple[Click, bool]:
        """The click a visit to `entry` records, or (True) the earlier click it repeats within debounce:
        one in the campaign clicked, or in the one the click would be stored in."""
        campaign, stream = self.route(entry, visitor, params, now)
        earlier = self.repeat_of(entry, visitor, now) or self.repeat_of(campaign, visitor, now)
        if earlier is not None:
            return earlier, True
        window = self.windows[campaign]
        flags = (
            not self.seen(visitor, now, int(GLOBAL_HOURS * 3_600_000)),
            not self.seen(visitor, now, window, campaign=campaign),
            stream is not None and not self.seen(visitor, now, window, campaign=campaign, stream=stream.id),
        )
        return Click(now, visitor, campaign, stream and stream.id, stream and stream.offer, "", flags), False

    def repeat_of(self, campaign: int, visitor, now) -> Click | None:
        earlier = [c for c in self.clicks if c.campaign == campaign and c.visitor == visitor]
        if earlier and earlier[-1].at >= now - DEBOUNCE_S * 1000:
            return earlier[-1]
        return None


class RoutingMachine(RuleBasedStateMachine):
    def __init__(self, db, settings_, geo_path, clock, names) -> None:
        super().__init__()
        self.db, self.settings, self.geo_path, self.clock, self.names = db, settings_, geo_path, clock, names
        clock.advance(40 * 86_400 + 0.123)  # Past every earlier example's windows and caps.
        self.model = Model()
        self.workers: list[ClickTracker | None] = [None, None]
        self.aliases: dict[int, str] = {}
        self.last: tuple | None = None  # The last click's (campaign, ip, ua, p, sub1).

    def worker(self, n: int) -> ClickTracker:
        if self.workers[n] is None:
            self.workers[n] = ClickTracker(
                self.db,
                spool_dir=self.settings.spool_dir,
                segment_bytes=self.settings.spool_segment_bytes,
                uniqueness_hours=GLOBAL_HOURS,
                debounce_seconds=DEBOUNCE_S,
                geo=GeoSource(self.geo_path),
                clock=self.clock,
                rng=random.Random(n),
            )
        return self.workers[n]

    def teardown(self) -> None:
        for tracker in self.workers:
            if tracker is not None:
                tracker.close()
        flush_spool(self.db, self.settings.spool_dir, self.settings.spool_segment_bytes)
        # The next example's trackers load only its own campaigns: the database is not emptied
        # between examples, and loading every earlier one was half of this test's CPU.
        for campaign in self.aliases:
            archive_campaign(self.db, campaign)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @precondition(lambda self: len(self.model.windows) < 3)
    @rule(
        hours=st.sampled_from([0.5, 1.0, 2.0]),
        daily=st.sampled_from([None, None, 1, 3]),
        total=st.sampled_from([None, None, 2, 5]),
    )
    def new_campaign(self, hours, daily, total) -> None:
        offer = create_offer(
            self.db, "o", "https://o.example/?s={subid}", daily_cap=daily, total_cap=total
        ).id
        self.model.offer_caps[offer] = (daily, total)
        n = next(self.names)
        campaign = create_campaign(
            self.db, f"C{n}", f"c{n}", offer_id=offer, uniqueness_hours=hours, timezone="UTC"
        )
        self.model.windows[campaign.id] = int(hours * 3_600_000)
        self.aliases[campaign.id] = f"c{n}"
        tracker = self.worker(0)
        tracker.refresh()
        stream = tracker.campaigns_by_id[campaign.id].regular[0]
        self.model.streams.append(Stream(stream.id, campaign.id, "regular", offer))

    @precondition(lambda self: self.model.windows and len(self.model.streams) < 8)
    @rule(
        data=st.data(),
        type=st.sampled_from(TYPES),
        filters=st.lists(st.sampled_from(FILTERS), max_size=3, unique_by=lambda f: f[0]),
        mode=st.sampled_from(["and", "or"]),
        daily=st.sampled_from([None, None, 1, 2]),
        total=st.sampled_from([None, None, 1, 3]),
        new_offer=st.booleans(),
        hop=st.integers(0, 2),
    )
    def new_stream(self, data, type, filters, mode, daily, total, new_offer, hop) -> None:
        campaign = data.draw(st.sampled_from(sorted(self.model.windows)))
        older = [c for c in sorted(self.model.windows) if c < campaign]
        if older and hop == 0:  # On to another campaign, where the click is stored.
            target = data.draw(st.sampled_from(older))
            stream = add_stream(
                self.db,
                campaign,
                type=type,
                action="campaign",
                payload=self.aliases[target],
                filters=[f[0] for f in filters],
                filter_mode=mode,
                daily_cap=daily,
                total_cap=total,
            )
            self.model.streams.append(
                Stream(stream.id, campaign, type, None, filters, mode, daily, total, target)
            )
            return
        if new_offer:
            cap = data.draw(st.sampled_from([(None, None), (1, None), (None, 2)]))
            offer = create_offer(
                self.db, "o", "https://o.example/?s={subid}", daily_cap=cap[0], total_cap=cap[1]
            ).id
            self.model.offer_caps[offer] = cap
        else:  # An offer other streams send to: its caps count all of them.
            offer = data.draw(st.sampled_from(sorted(self.model.offer_caps)))
        stream = add_stream(
            self.db,
            campaign,
            type=type,
            offers=[(offer, 100)],
            filters=[f[0] for f in filters],
            filter_mode=mode,
            daily_cap=daily,
            total_cap=total,
        )
        self.model.streams.append(Stream(stream.id, campaign, type, offer, filters, mode, daily, total))

    @precondition(lambda self: self.model.streams)
    @rule(
        data=st.data(),
        filters=st.lists(st.sampled_from(FILTERS), max_size=2, unique_by=lambda f: f[0]),
        daily=st.sampled_from([None, 1, 2]),
        total=st.sampled_from([None, 2, 4]),
    )
    def change_stream(self, data, filters, daily, total) -> None:
        stream = data.draw(st.sampled_from(self.model.streams))
        update_stream(
            self.db,
            stream.id,
            filters=[f[0] for f in filters] or None,
            clear_filters=not filters,
            daily_cap=daily,
            total_cap=total,
            clear_caps=True,
        )
        stream.filters, stream.daily_cap, stream.total_cap = filters, daily, total

    @precondition(lambda self: self.model.windows)
    @rule(
        data=st.data(),
        ip=st.sampled_from(sorted(COUNTRIES)),
        ua=st.sampled_from(sorted(USER_AGENTS)),
        p=st.sampled_from(["", "a", "A", "b", "ab", "c"]),
        sub1=st.sampled_from(["", "x", "yX"]),
        worker=st.sampled_from([0, 1]),
    )
    def click(self, data, ip, ua, p, sub1, worker) -> None:
        self.send(data.draw(st.sampled_from(sorted(self.model.windows))), ip, ua, p, sub1, worker)

    @precondition(lambda self: self.model.windows)
    @rule(data=st.data(), ip=st.sampled_from(sorted(COUNTRIES)), workers=st.sampled_from([(0, 0), (0, 1)]))
    def double_click(self, data, ip, workers) -> None:
        """A visitor's double click (on one worker or two): the second within debounce."""
        campaign = data.draw(st.sampled_from(sorted(self.model.windows)))
        self.send(campaign, ip, CHROME, "", "", workers[0])
        self.clock.advance(0.3)
        self.send(campaign, ip, CHROME, "", "", workers[1])

    @precondition(lambda self: self.last is not None)
    @rule(worker=st.sampled_from([0, 1]))
    def click_again(self, worker) -> None:
        """The last visit again (another worker, perhaps): debounce, windows and caps on one visitor."""
        assert self.last is not None
        self.send(*self.last[:5], worker)

    def send(self, campaign, ip, ua, p, sub1, worker) -> None:
        self.last = (campaign, ip, ua, p, sub1)
        params = {"p": p} if p else {}
        if sub1:
            params["sub1"] = sub1
        sub_ids = [sub1] + [""] * 29
        tracker = self.worker(worker)
        tracker.refresh()  # The test's config changes at once (a worker sees them within a second).
        config = tracker.campaigns_by_id[campaign]
        now = self.now_ms()
        visitor = (ip, ua)
        decision = tracker.track(config, Visit(ip=ip, user_agent=ua, params=params, sub_ids=sub_ids))
        expected, is_repeat = self.model.click(campaign, visitor, params, now)
        if is_repeat:
            assert decision.is_repeat and decision.subid == expected.subid, decision
            assert (decision.campaign_id, decision.stream_id, decision.offer_id) == (
                expected.campaign,
                expected.stream,
                expected.offer,
            )
            return
        assert not decision.is_repeat, (decision, self.model.clicks[-3:])
        got_flags = (decision.is_unique_global, decision.is_unique_campaign, decision.is_unique_stream)
        assert (decision.campaign_id, decision.stream_id, decision.offer_id, got_flags) == (
            expected.campaign,
            expected.stream,
            expected.offer,
            expected.flags,
        ), decision.route
        expected.subid = decision.subid
        self.model.clicks.append(expected)
        # The caps as they are now hold (a cap lowered below its count stays past; nothing more comes).
        for stream in self.model.streams:
            if stream.id == expected.stream:
                mine = [c for c in self.model.clicks if c.stream == stream.id]
                assert stream.total_cap is None or len(mine) <= stream.total_cap
                assert (
                    stream.daily_cap is None
                    or sum(c.at // DAY_MS == now // DAY_MS for c in mine) <= stream.daily_cap
                )

    @rule(seconds=st.sampled_from(ADVANCES))
    def advance(self, seconds) -> None:
        self.clock.advance(seconds)

    @rule()
    def flush(self) -> None:
        flush_spool(self.db, self.settings.spool_dir, self.settings.spool_segment_bytes)
        conn = self.db.connection()
        for click in self.model.clicks:
            row = conn.execute(
                "SELECT stream_id, offer_id, is_unique_global, is_unique_campaign, is_unique_stream "
                "FROM click WHERE subid = ?",
                (click.subid,),
            ).fetchone()
            assert row is not None, click
            assert (row[0], row[1], tuple(bool(x) for x in row[2:])) == (
                click.stream,
                click.offer,
                click.flags,
            )
        for stream in self.model.streams:
            counted = conn.execute(
                "SELECT COALESCE(SUM(clicks), 0) FROM click_counter WHERE scope = 'stream' AND ref_id = ?",
                (stream.id,),
            ).fetchone()[0]
            assert counted == sum(1 for c in self.model.clicks if c.stream == stream.id)

    @rule(worker=st.sampled_from([0, 1]))
    def restart_worker(self, worker) -> None:
        """A worker restarted: its counters from the database and the journal, its memory empty."""
        tracker = self.workers[worker]
        if tracker is not None:
            tracker.close()
        self.workers[worker] = None


@pytest.fixture
def geo_file(tmp_path):
    writer = MMDBWriter(
        ip_version=6, ipv4_compatible=True, database_type="GeoLite2-Country", languages=["en"]
    )
    writer.insert_network(IPSet(["10.1.0.0/16"]), {"country": {"iso_code": "US"}})
    writer.insert_network(IPSet(["10.2.0.0/16"]), {"country": {"iso_code": "DE"}})
    path = tmp_path / "country.mmdb"
    writer.to_db_file(str(path))
    return path


@pytest.mark.long
def test_routing_caps_uniqueness_and_debounce_follow_the_model(db, settings, geo_file, clock):
    import itertools

    names = itertools.count(1)
    run_state_machine_as_test(
        lambda: RoutingMachine(db, settings, geo_file, clock, names),
        settings=settings_for_ci(),
    )


def settings_for_ci():
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
