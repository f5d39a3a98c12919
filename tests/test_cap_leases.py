"""Cluster mode's caps reserved in blocks (models/cluster/leases.py, shared_state.py `LEASE_SCRIPT`):
four "nodes" — ClickTrackers in threads, each with its own spool and Redis connection — over one
database and one real Redis. A cap hit by all four at once stops at exactly the cap once each has
spent its last lease; a node killed with units left leaves the cap short by those (at most its last
lease), never over; a node stopped cleanly gives its units back for the others."""

from __future__ import annotations

import threading

import pytest

from models.admin.services import create_campaign, create_offer, update_stream
from models.clicks.visit import Visit
from models.cluster.leases import MAX_BLOCK, CapLeases, block_size

NODES = 4


def visit(n: int) -> Visit:
    return Visit(ip=f"203.0.{n // 250}.{n % 250 + 1}", user_agent="Mozilla/5.0 (X11) Firefox/120")


def capped_offer(db, alias: str, cap: int) -> tuple[int, int]:
    """A campaign whose offer has a total cap, with a fallback offer: (capped id, spare id)."""
    offer = create_offer(db, f"{alias} capped", "https://capped.example/?c={subid}", total_cap=cap).id
    spare = create_offer(db, f"{alias} spare", "https://spare.example/?c={subid}").id
    campaign = create_campaign(db, alias, alias, offer_id=offer)
    update_stream(db, campaign.streams.get().id, fallback_offer_id=spare)
    return offer, spare


class Nodes:
    """NODES trackers run in threads, each clicking as told; every lease granted is recorded."""

    def __init__(self, db, settings, redis_url, tmp_path) -> None:
        self.db, self.settings, self.redis_url, self.tmp_path = db, settings, redis_url, tmp_path
        self.grants: list[tuple[str, int]] = []  # (node, units), in the order Redis granted them.
        self.lock = threading.Lock()

    def run(self, work) -> dict[str, object]:
        """`work(name, tracker)` in a thread per node, all started together; their results by node.
        The tracker is closed after (a clean stop) unless `work` closed it otherwise."""
        from models.clicks.node import ensure_spool_node
        from models.clicks.tracker import ClickTracker
        from models.cluster.shared_state import SharedState

        results: dict[str, object] = {}
        errors: list[BaseException] = []
        start = threading.Barrier(NODES)

        def node(name: str) -> None:
            spool = self.tmp_path / name / "spool"
            spool.mkdir(parents=True, exist_ok=True)
            ensure_spool_node(spool, name)  # Its own name: its flusher lands it at its own position.
            try:
                shared = SharedState(self.redis_url, prefix="t:", timeout=2.0)
                grant = shared.leases.grant

                def recorded(key, units):
                    with self.lock:
                        self.grants.append((name, units))
                    grant(key, units)

                shared.leases.grant = recorded  # type: ignore[method-assign]
                tracker = ClickTracker(
                    self.db,
                    spool_dir=spool,
                    segment_bytes=self.settings.spool_segment_bytes,
                    uniqueness_hours=24,
                    debounce_seconds=2,
                    shared=shared,
                )
                try:
                    start.wait(timeout=30)
                    results[name] = work(name, tracker)
                finally:
                    tracker.close()
                    self.db.close()
            except BaseException as error:
                errors.append(error)
                start.abort()

        threads = [threading.Thread(target=node, args=(f"n{i}",)) for i in range(NODES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == [] and not any(thread.is_alive() for thread in threads)
        return results

    def landed_on(self, offer: int) -> int:
        """Flush every node's spool; the clicks PostgreSQL/SQLite then holds on the offer."""
        from models.clicks.spool import flush_spool

        for i in range(NODES):
            flush_spool(self.db, self.tmp_path / f"n{i}" / "spool", self.settings.spool_segment_bytes)
        sql = f"SELECT COUNT(*) FROM click WHERE offer_id = {int(offer)}"
        return self.db.execute_sql(sql).fetchone()[0]


def click_until_full(tracker, alias: str, first: int, offer: int) -> list[int]:
    """Click new visitors until one goes elsewhere: the node holds no unit and Redis has none left."""
    campaign = tracker.campaign(alias)
    offers = []
    for n in range(first, first + 10_000):
        offers.append(tracker.track(campaign, visit(n)).offer_id)
        if offers[-1] != offer:
            return offers
    raise AssertionError("the cap never filled")


@pytest.fixture
def nodes(db, settings, redis_url, tmp_path):
    return Nodes(db, settings, redis_url, tmp_path)


def cap_count(redis_url: str, offer: int) -> int:
    import redis

    admin = redis.Redis.from_url(redis_url)
    try:
        return int(admin.get(f"t:cap:offer:{offer}:total"))
    finally:
        admin.close()


def test_a_cap_hit_by_four_nodes_at_once_stops_at_exactly_the_cap(nodes, db, redis_url):
    cap = 500
    offer, _ = capped_offer(db, "four", cap)
    results = nodes.run(lambda name, tracker: click_until_full(tracker, "four", int(name[1:]) * 2000, offer))
    taken = sum(offers.count(offer) for offers in results.values())  # type: ignore[attr-defined]
    assert taken == cap
    assert nodes.landed_on(offer) == cap  # Each one landed, none lost, none over.
    assert cap_count(redis_url, offer) == cap  # Every unit leased was spent: none given back.
    units = [u for _, u in nodes.grants]
    assert sum(units) == cap and max(units) <= MAX_BLOCK
    assert len({name for name, _ in nodes.grants}) == NODES  # Every node leased...
    # ...and near the cap one unit a lease: per click, exact. (Not "the last one recorded": two threads
    # may record their grants in the other order than Redis made them.)
    assert min(units) == 1
    assert len(units) < cap // 4  # Far fewer round trips for caps than clicks.


def test_a_killed_node_leaves_the_cap_short_by_its_lease_and_a_stopped_one_gives_its_back(
    nodes, db, redis_url, monkeypatch
):
    """n0 is killed holding units (they die with it); n1 stops cleanly holding units (given back); n2 and
    n3 then click until the cap is full: the offer gets the cap less n0's unspent units, never more."""
    cap = 300
    offer, _ = capped_offer(db, "killed", cap)
    killed: dict[str, int] = {}
    leased = threading.Barrier(NODES)
    gone = {"n0": threading.Event(), "n1": threading.Event()}

    def work(name: str, tracker) -> list[int]:
        campaign = tracker.campaign("killed")
        first = int(name[1:]) * 2000
        offers = [tracker.track(campaign, visit(first + n)).offer_id for n in range(3)]
        leased.wait(timeout=30)  # Every node holds units of a lease now.
        if name == "n0":  # Killed: the process and its memory are gone; nothing is given back.
            killed["units"] = sum(tracker.shared.leases.held.values())
            killed["last_lease"] = [units for node, units in nodes.grants if node == name][-1]
            tracker.shared.leases.held.clear()
            monkeypatch.setattr(tracker.shared, "give_back", lambda: None)
        elif name == "n1":  # A clean stop (a worker's drained exit calls the same).
            assert sum(tracker.shared.leases.held.values()) > 0
            tracker.stop()
        if name in gone:
            gone[name].set()
            return offers
        for event in gone.values():
            assert event.wait(timeout=30)
        return offers + click_until_full(tracker, "killed", first + 3, offer)

    results = nodes.run(work)
    taken = sum(offers.count(offer) for offers in results.values())  # type: ignore[attr-defined]
    assert 0 < killed["units"] <= killed["last_lease"]
    assert taken == cap - killed["units"]  # Short by exactly the killed node's unspent units, never over.
    assert nodes.landed_on(offer) == taken
    assert cap_count(redis_url, offer) == cap


def test_a_lease_block_shrinks_as_the_cap_nears_down_to_one():
    assert block_size(500, 0, 1) == MAX_BLOCK
    assert block_size(500, 400, 4) == 12  # 100 left over 8.
    assert block_size(500, 495, 4) == 1  # Near the cap: one a lease, so per click.
    assert block_size(500, 499, 1) == 1


def test_a_day_counters_units_die_with_its_day():
    leases = CapLeases()
    leases.grant(("offer", 1, 20261204), 5)
    leases.grant(("offer", 1, None), 5)
    leases.grant(("offer", 1, 20261205), 2)
    assert leases.held == {("offer", 1, None): 5, ("offer", 1, 20261205): 2}
    spent = leases.spend([("offer", 1, 20261205), ("offer", 1, None)])
    leases.put_back(spent)  # Its line could not be written: the units serve the next click.
    assert leases.drain() == {("offer", 1, None): 5, ("offer", 1, 20261205): 2} and leases.held == {}


def test_a_served_worker_that_stops_cleanly_gives_its_units_back(db, start_server, redis_url, settings):
    """Through a real `lanner serve` in cluster mode: its web worker leases a block at its first capped
    click, and its drained exit (SIGTERM) gives the unspent units back and leaves the holders."""
    import redis
    from conftest import request

    offer, _ = capped_offer(db, "served", 10)
    server = start_server(LANNER_REDIS_URL=redis_url, LANNER_REDIS_PREFIX="t:", LANNER_NODE_ID="a")
    status, headers, _ = request(server.port, "/served", {"X-Real-IP": "203.0.113.9", "User-Agent": "UA"})
    assert status == 302 and headers["location"].startswith("https://capped.example/"), server.log
    admin = redis.Redis.from_url(redis_url)
    try:
        assert cap_count(redis_url, offer) == 5  # A lease of 10 // (2 x 1 holder); one spent.
        assert admin.zcard("t:cap-holders") == 1
        assert server.stop() in (0, -15)
        assert cap_count(redis_url, offer) == 1, server.log  # The four unspent units given back.
        assert admin.zcard("t:cap-holders") == 0
    finally:
        admin.close()
