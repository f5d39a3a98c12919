"""Cluster mode's shared click state (models/cluster/shared_state.py): two "nodes" — ClickTrackers
with their own spools — over one database and one real Redis: a capped offer stops at exactly its cap
(leases); debounce and uniqueness are each node's own (a visitor reaching two nodes gets a subid on
each, and counts unique on the second once); with Redis gone or slow clicks still get decisions and
lines, capped offers get only the units a worker holds, and it all resumes when Redis returns (its
counters seeded from the database and the node's unlanded clicks); the LP click's first wins across
the nodes."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from models.admin.services import create_campaign, create_offer, update_stream
from models.clicks.visit import Visit
from models.cluster.shared_state import redis_health

CAP = 5


class Monotonic:
    """The retry clock of a SharedState, moved by the test (no sleeping for the backoff)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def visit(n: int, ua: str = "Mozilla/5.0 (X11) Firefox/120") -> Visit:
    return Visit(ip=f"198.51.{n // 250}.{n % 250 + 1}", user_agent=ua)


@pytest.fixture
def capped(db):
    """A campaign whose offer has a daily cap of CAP, with a fallback offer: (alias, capped id, spare id)."""
    offer = create_offer(db, "Capped", "https://capped.example/?c={subid}", daily_cap=CAP).id
    spare = create_offer(db, "Spare", "https://spare.example/?c={subid}").id
    campaign = create_campaign(db, "Cap", "cap", offer_id=offer)
    update_stream(db, campaign.streams.get().id, fallback_offer_id=spare)
    return "cap", offer, spare


@pytest.fixture
def node(make_tracker, redis_url, tmp_path):
    """A tracker with its own spool and its own Redis connection: one node of a cluster."""
    from models.cluster.shared_state import SharedState

    def make(name: str, url: str = redis_url, clock=None, timeout: float = 2.0):
        """`timeout`: Redis's, generous unless the test is about it: on a busy box a 50 ms one left a
        claim in Redis that the node had given back (the release timed out)."""
        spool = tmp_path / name / "spool"
        spool.mkdir(parents=True)
        shared = SharedState(url, prefix="t:", timeout=timeout, clock=clock or time.monotonic)
        return make_tracker(spool_dir=spool, shared=shared)

    return make


def spool_lines(tracker) -> int:
    return sum(
        path.read_bytes().count(b"\n") for path in Path(tracker.journal.spool_dir).glob("clicks.*.log")
    )


def test_a_capped_offer_stops_at_its_cap_over_two_nodes(capped, node, redis_url):
    alias, offer, spare = capped
    a, b = node("a"), node("b")
    offers = []
    for n in range(3 * CAP):
        tracker = (a, b)[n % 2]
        offers.append(tracker.track(tracker.campaign(alias), visit(n)).offer_id)
    assert offers.count(offer) == CAP
    assert offers.count(spare) == 2 * CAP
    assert offers[: 2 * CAP - CAP].count(offer) == CAP  # The first CAP clicks took it, whichever node.
    assert spool_lines(a) + spool_lines(b) == 3 * CAP  # Every click has its line.


def test_a_capped_offer_stops_at_its_cap_under_two_nodes_in_threads(
    capped, db, settings, redis_url, tmp_path
):
    from models.clicks.tracker import ClickTracker
    from models.cluster.shared_state import SharedState

    alias, offer, _ = capped
    results: dict[str, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run(name: str, first: int) -> None:
        spool = tmp_path / name / "spool"
        spool.mkdir(parents=True)
        try:
            tracker = ClickTracker(
                db,
                spool_dir=spool,
                segment_bytes=settings.spool_segment_bytes,
                uniqueness_hours=24,
                debounce_seconds=2,
                shared=SharedState(redis_url, prefix="t:", timeout=1.0),
            )
            try:
                start.wait(timeout=10)
                campaign = tracker.campaign(alias)
                results[name] = [tracker.track(campaign, visit(first + n)).offer_id for n in range(4 * CAP)]
            finally:
                tracker.close()
                db.close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(name, first)) for name, first in (("a", 0), ("b", 500))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sum(offers.count(offer) for offers in results.values()) == CAP


def test_a_visitor_sent_to_two_nodes_directly_gets_a_subid_on_each_and_both_land(capped, node, clock):
    """Debounce is the node's own (nginx sends one visitor to one node: tests/test_cluster.py). A visitor
    who reaches two nodes within debounce anyway (a node left the upstream) gets a subid on each: two
    clicks, each in its node's journal, no subid twice, none lost (docs/SCALING.md)."""
    alias, *_ = capped
    a, b = node("a"), node("b")
    first = a.track(a.campaign(alias), visit(1))
    clock.advance(0.5)
    other = b.track(b.campaign(alias), visit(1))
    clock.advance(0.5)
    back = a.track(a.campaign(alias), visit(1))
    assert other.subid != first.subid and not other.is_repeat  # Node b never saw node a's click.
    assert (back.subid, back.is_repeat) == (first.subid, True)  # Node a's own debounce.
    assert (back.offer_id, back.location) == (first.offer_id, first.location)
    assert spool_lines(a) == 1 and spool_lines(b) == 1  # Two clicks, both journalled.
    other_agent = a.track(a.campaign(alias), visit(1, ua="Mozilla/5.0 (Android) Chrome/138"))
    assert other_agent.subid != first.subid and not other_agent.is_repeat
    clock.advance(2.5)  # Past debounce: a new click.
    later = a.track(a.campaign(alias), visit(1))
    assert later.subid != first.subid and not later.is_repeat


def flags(decision) -> tuple[bool, bool, bool]:
    return decision.is_unique_global, decision.is_unique_campaign, decision.is_unique_stream


def test_a_visitor_moved_to_another_node_counts_unique_there_once(db, node, clock):
    """Uniqueness is the node's own: a visitor the ring moves to another node is unique there once, then
    seen as on one box."""
    create_campaign(db, "One", "one", offer_url="https://one.example/?c={subid}")
    create_campaign(db, "Two", "two", offer_url="https://two.example/?c={subid}")
    a, b = node("a"), node("b")
    assert flags(a.track(a.campaign("one"), visit(1))) == (True, True, True)
    clock.advance(5)  # Past debounce: the visitor, moved to node b, which has not seen the first click.
    assert flags(b.track(b.campaign("one"), visit(1))) == (True, True, True)
    clock.advance(5)
    assert flags(b.track(b.campaign("one"), visit(1))) == (False, False, False)
    assert flags(b.track(b.campaign("two"), visit(1))) == (False, True, True)
    assert flags(a.track(a.campaign("one"), visit(1))) == (False, False, False)  # Node a's own click.


def test_with_redis_unreachable_clicks_go_on_and_capped_offers_get_none(capped, node, tmp_path, caplog):
    alias, offer, spare = capped
    dead = node("a", url=f"unix://{tmp_path / 'no-redis.sock'}")
    with caplog.at_level(logging.WARNING, logger="models.cluster.shared_state"):
        decisions = [dead.track(dead.campaign(alias), visit(n)) for n in range(2 * CAP)]
    assert [d.offer_id for d in decisions] == [spare] * (2 * CAP)  # Never over the cap: none of it.
    assert all(d.subid and d.location for d in decisions)
    assert spool_lines(dead) == 2 * CAP
    assert all(flags(d) == (True, True, True) for d in decisions)  # The node's own knowledge.
    assert redis_health(dead.shared.url, timeout=0.05)["state"] == "unreachable"
    status = dead.shared.status()
    assert status["state"] == "degraded" and status["alone_clicks"] == 2 * CAP and status["last_error"]
    warnings = [r for r in caplog.records if "cannot be reached" in r.getMessage()]
    assert len(warnings) == 1  # Once a minute, not once a click.


class PrivateRedis:
    """A redis-server of this test's own on a fixed socket, so it can be stopped and started again."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary, self.directory = binary, directory
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        import redis

        args = [
            self.binary,
            "--port",
            "0",
            "--unixsocket",
            str(self.socket),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--daemonize",
            "no",
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            except redis.RedisError:
                pass
            assert self.process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
            if self.socket.exists():
                os.unlink(self.socket)


@pytest.fixture
def private_redis(redis_server, tmp_path):
    server = PrivateRedis(redis_server.binary, tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("seeder", ["holder", "other"])
def test_redis_lost_and_back_seeds_the_cap_from_the_database_and_the_node(
    capped, db, node, private_redis, clock, caplog, seeder
):
    """Redis stops mid-traffic and comes back empty: a cap counter is seeded (SET NX) from the database's
    landed clicks plus the seeding node's unlanded ones. Exact when the seeder holds every unlanded click
    of the offer; when another node holds some, the cap is passed by at most those (docs/SCALING.md)."""
    from models.routing.caps import OFFER, add_to_counters, local_days

    alias, offer, spare = capped
    with db.atomic():  # Two clicks other nodes landed earlier.
        add_to_counters(db.connection(), [(OFFER, offer, local_days("UTC").day(int(clock() * 1000)), 2)])
    retry = Monotonic()
    holder = node("holder", url=private_redis.url, clock=retry)
    other = node("other", url=private_redis.url, clock=retry)
    assert holder.track(holder.campaign(alias), visit(0)).offer_id == offer  # Seeded at 2 on first use.

    private_redis.stop()
    with caplog.at_level(logging.WARNING, logger="models.cluster.shared_state"):
        alone = [t.track(t.campaign(alias), visit(10 + n)) for n, t in enumerate((holder, other) * 2)]
        assert [d.offer_id for d in alone] == [spare] * 4 and all(d.subid and d.location for d in alone)
        assert holder.shared.status()["state"] == other.shared.status()["state"] == "degraded"
        assert spool_lines(holder) == spool_lines(other) + 1 == 3

        private_redis.start()  # Empty: no counters, no uniqueness, no script.
        retry.now += 5  # Past the backoff: the next click asks Redis again.
        first, second = (holder, other) if seeder == "holder" else (other, holder)
        offers = [
            t.track(t.campaign(alias), visit(20 + n)).offer_id for n, t in enumerate((first, second) * CAP)
        ]
    assert holder.shared.status()["state"] == other.shared.status()["state"] == "ok"
    assert any("answers again" in r.getMessage() for r in caplog.records)
    taken = 3 + offers.count(offer)  # 2 landed + the holder's unlanded one + those after the outage.
    assert taken == (CAP if seeder == "holder" else CAP + 1)


def test_without_a_redis_url_nothing_of_it_is_loaded(db, env, capped):
    """The single box's click path imports neither redis-py nor models/cluster/."""
    import sys

    code = (
        "import sys\n"
        "from app import create_tracker\n"
        "from models.clicks.visit import Visit\n"
        "from settings import load_settings\n"
        "tracker = create_tracker(load_settings())\n"
        "assert tracker.shared is None\n"
        "tracker.track(tracker.campaign('cap'), Visit(ip='198.51.100.9', user_agent='UA'))\n"
        "loaded = [m for m in sys.modules if m == 'redis' or m.startswith(('redis.', 'models.cluster'))]\n"
        "print(sorted(loaded))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_slow_redis_times_out_per_click_and_is_asked_again_after_the_backoff(capped, node, redis_url):
    import redis

    alias, offer, spare = capped
    retry = Monotonic()
    a = node("a", clock=retry, timeout=0.05)
    # A lease of 2 of the cap's 5 (the rest over twice the one holder): one unit left after this click,
    # spent by the next one without asking Redis.
    assert [a.track(a.campaign(alias), visit(n)).offer_id for n in range(2)] == [offer, offer]
    admin = redis.Redis.from_url(redis_url)
    admin.client_pause(300)  # Commands wait 0.3 s: past the 50 ms timeout.
    slow = a.track(a.campaign(alias), visit(2))  # No unit left: a lease is asked for, and times out.
    assert slow.offer_id == spare and slow.subid and a.shared.status()["state"] == "degraded"
    assert a.track(a.campaign(alias), visit(3)).offer_id == spare  # Within the backoff: not asked.
    assert a.shared.status()["alone_clicks"] == 2
    admin.client_unpause()
    admin.close()
    assert redis_health(redis_url)["state"] == "ok"
    retry.now += 5
    assert a.track(a.campaign(alias), visit(4)).offer_id == offer
    assert a.shared.status()["state"] == "ok"


def test_a_click_whose_line_cannot_be_written_leaves_no_decision_for_other_nodes(capped, node, monkeypatch):
    import errno

    from models.clicks.refusals import SpoolUnwritable

    alias, *_ = capped
    a, b = node("a"), node("b")

    def full_disk(line):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(a.journal, "append", full_disk)
    with pytest.raises(SpoolUnwritable):
        a.track(a.campaign(alias), visit(1))
    other = b.track(b.campaign(alias), visit(1))
    assert not other.is_repeat and spool_lines(b) == 1  # A click of its own, not a subid that never landed.


class Killed(BaseException):
    """The node dies between Redis's script and its journal line (SIGKILL, power): nothing after runs."""


def test_a_node_killed_before_its_line_leaves_no_decision_and_the_retry_lands(
    capped, node, monkeypatch, redis_url, db, settings, clock
):
    """nginx retries the click on the next node: it must get a subid that lands, not the dead one's."""
    import redis

    from models.clicks.spool import flush_spool

    alias, offer, _ = capped
    a, b = node("a"), node("b")

    def killed(line):
        raise Killed()

    monkeypatch.setattr(a.journal, "append", killed)
    with pytest.raises(Killed):
        a.track(a.campaign(alias), visit(1))
    admin = redis.Redis.from_url(redis_url)
    try:
        assert admin.keys("t:debounce:*") == admin.keys("t:unique:*") == []  # Nothing per click in Redis.
        # Node a's lease of 2 is taken in Redis; the unit the dead click spent is lost with the node:
        # the cap may stop short by a's lease, never over.
        assert [int(admin.get(key)) for key in admin.keys("t:cap:*")] == [2]
    finally:
        admin.close()
    clock.advance(0.2)  # The retry, well within debounce.
    retry = b.track(b.campaign(alias), visit(1))
    assert not retry.is_repeat and retry.subid and retry.offer_id == offer
    assert spool_lines(a) == 0 and spool_lines(b) == 1
    flush_spool(db, b.journal.spool_dir, settings.spool_segment_bytes)
    assert [row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()] == [retry.subid]
    clock.advance(0.5)
    monkeypatch.undo()
    # Node a back: the retry has landed, and a worker that started moments ago asks the landed clicks
    # for debounce (here the database; a cluster node its own visitor file): the same subid.
    again = a.track(a.campaign(alias), visit(1))
    assert (again.subid, again.is_repeat) == (retry.subid, True) and spool_lines(a) == 0


def test_a_click_whose_line_cannot_be_written_gives_its_cap_count_back(capped, node, monkeypatch, redis_url):
    """A full disk refuses the node's clicks: they must not use up the cluster's caps. Their lease
    units go back to the node's lease (its clicks once the disk has room), and a clean stop gives them
    back to Redis for the other nodes."""
    import errno

    import redis

    from models.clicks.refusals import SpoolUnwritable

    alias, offer, _ = capped
    a, b = node("a"), node("b")

    def full_disk(line):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(a.journal, "append", full_disk)
    for n in range(2 * CAP):
        with pytest.raises(SpoolUnwritable):
            a.track(a.campaign(alias), visit(n))
    admin = redis.Redis.from_url(redis_url)
    try:
        assert [int(admin.get(key)) for key in admin.keys("t:cap:*")] == [2]  # a's lease (5 // 2)...
        assert sum(a.shared.leases.held.values()) == 2  # ...unspent: every refused click put its unit back.
        a.shared.give_back()  # Node a stops cleanly.
        assert [int(admin.get(key)) for key in admin.keys("t:cap:*")] == [0]
    finally:
        admin.close()
    offers = [b.track(b.campaign(alias), visit(100 + n)).offer_id for n in range(2 * CAP)]
    assert offers.count(offer) == CAP  # The whole cap, for clicks that land.


def test_a_stream_total_cap_stops_at_its_cap_over_two_nodes(db, node):
    campaign = create_campaign(db, "Total", "total", offer_url="https://t.example/?c={subid}")
    stream = campaign.streams.get().id
    update_stream(db, stream, total_cap=3)
    a, b = node("a"), node("b")
    streams = [t.track(t.campaign("total"), visit(n)).stream_id for n, t in enumerate((a, b) * 4)]
    assert streams.count(stream) == 3 and streams.count(None) == 5  # Then the campaign's default: none.


def test_a_cap_counter_that_cannot_be_seeded_sends_the_click_elsewhere(capped, node, monkeypatch):
    from models.store.database import StoreBusy

    alias, offer, spare = capped
    a = node("a")

    def busy(cap):
        raise StoreBusy("database is locked")

    monkeypatch.setattr(a, "_seed_count", busy)
    decision = a.track(a.campaign(alias), visit(1))
    assert decision.offer_id == spare and decision.subid and spool_lines(a) == 1
    monkeypatch.undo()
    a.shared.retry_at = 0  # Past the backoff.
    assert a.track(a.campaign(alias), visit(2)).offer_id == offer


@pytest.fixture
def named_node(make_tracker, redis_url, tmp_path):
    """A node whose spool has its own name (LANNER_NODE_ID): its flusher lands it at its own position."""
    from models.clicks.node import ensure_spool_node
    from models.cluster.shared_state import SharedState

    def make(name: str):
        spool = tmp_path / name / "spool"
        spool.mkdir(parents=True)
        ensure_spool_node(spool, name)
        # A generous timeout: on a busy box a 50 ms one sends a node alone (and this test is not about that).
        return make_tracker(spool_dir=spool, shared=SharedState(redis_url, prefix="t:", timeout=1.0))

    return make


def test_the_first_lp_click_wins_over_two_nodes_and_the_other_writes_nothing(db, named_node, settings, clock):
    """The click landed (node a's flusher); its LP clicks reach both nodes: one offer, one LP line in all."""
    from landers import lander_campaign

    from models.clicks.spool import flush_spool

    offers = [{"url": f"https://o{n}.example/?c={{subid}}"} for n in range(6)]
    lander_campaign(db, "funnel", [{"url": "https://lp.example/?c={subid}&go={offer}"}], offers=offers)
    a, b = named_node("a"), named_node("b")
    subids = [a.track(a.campaign("funnel"), visit(n)).subid for n in range(12)]
    flush_spool(db, a.journal.spool_dir, settings.spool_segment_bytes)
    clock.advance(1)
    for subid in subids:
        first, second = b.lp_click(subid), a.lp_click(subid)
        assert not first.is_repeat and second.is_repeat
        assert (second.offer_id, second.location) == (first.offer_id, first.location)
    lines = [
        line
        for tracker in (a, b)
        for path in Path(tracker.journal.spool_dir).glob("clicks.*.log")
        for line in path.read_bytes().splitlines()
        if line.startswith(b"lp\t")
    ]
    assert len(lines) == 12 and all(line.split(b"\t")[1].decode() in subids for line in lines)
    flush_spool(db, b.journal.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM click WHERE lp_clicked_at IS NOT NULL").fetchone()[0] == 12


def test_an_lp_click_with_redis_away_is_decided_by_the_node_alone(db, node, settings, tmp_path):
    from landers import lander_campaign

    from models.clicks.spool import flush_spool

    lander_campaign(db, "alone", [{"url": "https://lp.example/?c={subid}"}])
    lone = node("lone", url="redis://127.0.0.1:1/0")  # Nothing listens there.
    decision = lone.track(lone.campaign("alone"), visit(1))
    lp = lone.lp_click(decision.subid)
    assert lp is not None and not lp.is_repeat and lone.lp_click(decision.subid).is_repeat
    flush_spool(db, lone.journal.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM click WHERE lp_clicked_at IS NOT NULL").fetchone()[0] == 1


def test_an_lp_click_on_another_node_before_its_click_landed_waits_for_it_and_lands_once(
    db, named_node, settings, clock
):
    """The click is in node a's spool only; its LP click comes in on node b, whose flusher lands first."""
    from landers import lander_campaign

    from models.clicks.spool import flush_spool

    made = lander_campaign(db, "far", [{"url": "https://lp.example/?c={subid}&go={offer}"}])
    a, b = named_node("a"), named_node("b")
    decisions = [a.track(a.campaign("far"), visit(n, ua=f"far {n}")) for n in range(5)]
    clock.advance(1)
    answers = [b.lp_click(d.subid) for d in decisions]
    assert all(lp is not None and not lp.is_repeat for lp in answers)
    assert all(a.lp_click(d.subid).is_repeat for d in decisions)  # The claim in Redis: b was first.
    flush_spool(db, b.journal.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM lp_click_parked").fetchone()[0] == 5
    flush_spool(db, a.journal.spool_dir, settings.spool_segment_bytes)
    assert db.execute_sql("SELECT COUNT(*) FROM lp_click_parked").fetchone()[0] == 0
    landed = db.execute_sql("SELECT offer_id FROM click WHERE lp_clicked_at IS NOT NULL").fetchall()
    assert [row[0] for row in landed] == [made["offer_ids"][0]] * 5
    counted = db.execute_sql(
        f"SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = {made['offer_ids'][0]:d}"
    ).fetchone()[0]
    assert counted == 5
    flush_spool(db, b.journal.spool_dir, settings.spool_segment_bytes)  # Nothing more to land.
    assert db.execute_sql("SELECT SUM(lp_clicks) FROM rollup_campaign_day").fetchone()[0] == 5


def capped_lander_campaign(db, alias: str, total_cap: int) -> tuple[int, int]:
    """A stream with a lander; behind it an offer with a total cap, weighted 1000:1 over a spare one."""
    from landers import lander_campaign

    made = lander_campaign(
        db,
        alias,
        [{"url": "https://lp.example/?c={subid}&go={offer}"}],
        offers=[
            {"url": "https://capped.example/?c={subid}", "total_cap": total_cap, "weight": 1000},
            {"url": "https://spare.example/?c={subid}", "weight": 1},
        ],
    )
    return made["offer_ids"][0], made["offer_ids"][1]


def test_an_offer_total_cap_at_the_lp_click_holds_over_two_nodes_in_threads(
    db, settings, redis_url, tmp_path
):
    """40 LP clicks at once on two nodes (each its own spool: neither sees the other's LP lines): the
    cap of 10 is counted in Redis, so exactly 10 go to the capped offer; a repeat counts nothing."""
    import redis

    from models.clicks.tracker import ClickTracker
    from models.cluster.shared_state import SharedState

    capped_offer, spare = capped_lander_campaign(db, "lpcap", 10)
    subids: dict[str, list[str]] = {}
    answers: dict[str, list] = {}
    repeats: dict[str, list] = {}
    errors: list[BaseException] = []
    clicked, lp_clicked, repeated = threading.Barrier(2), threading.Barrier(2), threading.Barrier(2)

    def run(name: str, other: str, first: int) -> None:
        spool = tmp_path / name / "spool"
        spool.mkdir(parents=True)
        try:
            tracker = ClickTracker(
                db,
                spool_dir=spool,
                segment_bytes=settings.spool_segment_bytes,
                uniqueness_hours=24,
                debounce_seconds=2,
                shared=SharedState(redis_url, prefix="t:", timeout=1.0),
            )
            try:
                campaign = tracker.campaign("lpcap")
                subids[name] = [tracker.track(campaign, visit(first + n)).subid for n in range(20)]
                clicked.wait(timeout=20)
                answers[name] = [tracker.lp_click(subid) for subid in subids[name]]
                lp_clicked.wait(timeout=20)
                # Each LP click again, on the other node: the first one's answer, nothing counted.
                repeats[name] = [tracker.lp_click(subid) for subid in subids[other]]
                repeated.wait(timeout=20)
            finally:
                tracker.close()
                db.close()
        except BaseException as error:
            errors.append(error)
            for barrier in (clicked, lp_clicked, repeated):
                barrier.abort()

    threads = [
        threading.Thread(target=run, args=(name, other, first))
        for name, other, first in (("a", "b", 0), ("b", "a", 500))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    chosen = [lp.offer_id for lp in answers["a"] + answers["b"]]
    assert not any(lp.is_repeat for lp in answers["a"] + answers["b"])
    assert chosen.count(capped_offer) == 10 and chosen.count(spare) == 30
    again = {lp.subid: lp.offer_id for lp in repeats["a"] + repeats["b"]}
    assert all(lp.is_repeat for lp in repeats["a"] + repeats["b"])
    assert again == {lp.subid: lp.offer_id for lp in answers["a"] + answers["b"]}
    lines = [
        line
        for name in ("a", "b")
        for path in (tmp_path / name / "spool").glob("clicks.*.log")
        for line in path.read_bytes().splitlines()
        if line.startswith(b"lp\t")
    ]
    assert len(lines) == 40
    admin = redis.Redis.from_url(redis_url)
    try:
        assert int(admin.get(f"t:cap:offer:{capped_offer}:total")) == 10
    finally:
        admin.close()


def test_an_lp_click_with_redis_away_sends_none_to_a_capped_offer(db, node, settings, tmp_path):
    """As at a click: a node alone cannot know how much of a cap the others used, so it sends none of it."""
    from models.clicks.spool import flush_spool

    capped_offer, spare = capped_lander_campaign(db, "lpalone", 10)
    lone = node("lone", url=f"unix://{tmp_path / 'no-redis.sock'}")
    subids = [lone.track(lone.campaign("lpalone"), visit(n)).subid for n in range(5)]
    answers = [lone.lp_click(subid) for subid in subids]
    assert [(lp.offer_id, lp.is_repeat) for lp in answers] == [(spare, False)] * 5
    assert all(lp.location.startswith("https://spare.example/") for lp in answers)
    assert all(lone.lp_click(subid).is_repeat for subid in subids)  # Its own journal: first wins alone.
    assert lone.shared.status()["state"] == "degraded"
    flush_spool(db, lone.journal.spool_dir, settings.spool_segment_bytes)
    landed = db.execute_sql("SELECT offer_id FROM click WHERE lp_clicked_at IS NOT NULL").fetchall()
    assert [row[0] for row in landed] == [spare] * 5


def test_an_lp_click_whose_line_cannot_be_written_gives_its_claim_and_cap_count_back(
    db, node, monkeypatch, redis_url
):
    import errno

    import redis

    from models.clicks.refusals import SpoolUnwritable

    capped_offer, spare = capped_lander_campaign(db, "lpfull", 1)
    a, b = node("a"), node("b")
    subid = a.track(a.campaign("lpfull"), visit(1)).subid

    def full_disk(line):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(a.journal, "append", full_disk)
    with pytest.raises(SpoolUnwritable):
        a.lp_click(subid)
    admin = redis.Redis.from_url(redis_url)
    try:
        assert admin.keys("t:lp:*") == []
        assert int(admin.get(f"t:cap:offer:{capped_offer}:total")) == 1  # a's lease of the one unit...
        assert sum(a.shared.leases.held.values()) == 1  # ...put back, unspent.
        a.shared.give_back()  # Node a stops cleanly: the unit is the cluster's again.
        assert int(admin.get(f"t:cap:offer:{capped_offer}:total")) == 0
    finally:
        admin.close()
    monkeypatch.undo()
    retry = b.lp_click(subid)  # The visitor's retry, on the other node: the first LP click, the cap's one.
    assert (retry.offer_id, retry.is_repeat) == (capped_offer, False)
    other = a.track(a.campaign("lpfull"), visit(2)).subid
    assert a.lp_click(other).offer_id == spare  # The cap of 1 is spent, once.


def test_an_lp_click_cap_counter_redis_lost_is_seeded_from_landed_and_unlanded_lp_clicks(
    db, node, settings, redis_url
):
    """A cap counter Redis lost starts again from the LP clicks landed in the database and the node's
    unlanded ones: the cap of 4 takes one more, not four."""
    import redis

    from models.clicks.spool import flush_spool

    capped_offer, spare = capped_lander_campaign(db, "lpseed", 4)
    a = node("a")
    subids = [a.track(a.campaign("lpseed"), visit(n)).subid for n in range(8)]
    assert [a.lp_click(subid).offer_id for subid in subids[:2]] == [capped_offer] * 2
    a.refresh()  # Their bucket of unlanded clicks closes at the journal's end...
    flush_spool(db, a.journal.spool_dir, settings.spool_segment_bytes)  # ...and those two landed.
    assert a.lp_click(subids[2]).offer_id == capped_offer  # ...this one not.
    admin = redis.Redis.from_url(redis_url)
    try:
        admin.delete(f"t:cap:offer:{capped_offer}:total")  # Redis lost it.
        offers = [a.lp_click(subid).offer_id for subid in subids[3:]]
        assert offers == [capped_offer] + [spare] * 4
        assert int(admin.get(f"t:cap:offer:{capped_offer}:total")) == 4
    finally:
        admin.close()
