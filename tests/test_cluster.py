"""Cluster mode end to end (docs/SCALING.md): two whole nodes, each `lanner serve` and `lanner worker` with
its own data directory and node name, on one PostgreSQL and one Redis, behind one nginx upstream.

The cluster is started once for the module (~6 s of four processes starting); each test has campaigns,
visitors and postbacks of its own and asserts only on those. The outage tests, last, stop the run's
PostgreSQL or Redis (tests/servers.py: this pytest process's own) and start it again.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from cluster_nodes import Clicks, Node, nginx_required, start_nginx, two_nodes, upstream_args
from conftest import LiveProcess, request, run_lanner, wait_healthy, wait_until

pytestmark = [pytest.mark.xdist_group("cluster"), nginx_required]

CAP = 20
# Failure timeouts, wide for a box the rest of the run (or another job) keeps busy: the flushers land
# what a test clicked in well under a second; a node starts in a few seconds.
LAND_SECONDS = 60
START_SECONDS = 90


@dataclass
class Cluster:
    nodes: list[Node]
    postgres: object  # tests/servers.py PostgresServer
    redis: object  # tests/servers.py RedisServer
    env: dict[str, str]
    directory: Path
    front: LiveProcess | None = None

    @property
    def port(self) -> int:
        """nginx's: one upstream over every node."""
        return self.front.port

    def start_front(self, nodes: list[Node] | None = None) -> None:
        """nginx over `nodes` (all by default), in place of the one before."""
        if self.front is not None:
            self.front.stop()
        webs = [node.web for node in (self.nodes if nodes is None else nodes)]
        self.front = start_nginx(self.directory, self.env, *upstream_args(webs))

    def logs(self) -> str:
        return "\n".join(node.logs for node in self.nodes)

    def wait_landed(self) -> None:
        """Until every node's flusher has landed its whole spool (its `spool_node` row caught up)."""
        from models.clicks.spool import spool_status
        from models.store.database import STORE_ERRORS, db

        def caught_up() -> bool:
            try:
                return all(spool_status(db, node.spool_dir).pending_clicks == 0 for node in self.nodes)
            except STORE_ERRORS:  # This process's connection, cut by an outage: the next look connects.
                return False

        wait_until(caught_up, LAND_SECONDS, "both spools to land", self.logs)

    def positions(self) -> list[tuple[int, int]]:
        """Where each node's spool has landed up to (its `spool_node` row)."""
        from models.clicks.spool import read_position
        from models.store.database import db

        return [read_position(db, node.spool_dir) for node in self.nodes]

    def stored(self, campaign_id: int) -> list[tuple[str, int]]:
        """(subid, offer id) of the campaign's clicks in PostgreSQL."""
        from models.store.database import db

        cursor = db.execute_sql("SELECT subid, offer_id FROM click WHERE campaign_id = %s", (campaign_id,))
        return [tuple(row) for row in cursor.fetchall()]

    def conversions(self, subid: str) -> list[tuple[str, str]]:
        from models.store.database import db

        cursor = db.execute_sql("SELECT tid, status FROM conversion WHERE subid = %s", (subid,))
        return [tuple(row) for row in cursor.fetchall()]

    def postback_key(self) -> str:
        from models.conversions.postbacks import read_secret
        from models.store.database import db

        return read_secret(db, "postback_key")


@pytest.fixture(scope="module")
def cluster(postgres_server, postgres_template, redis_server, tmp_path_factory):
    """Two nodes on a database of their own in the run's PostgreSQL and on the run's Redis, behind nginx.

    The outage tests stop and start those servers: they are this pytest process's own (one per xdist
    worker), and no other test runs in it meanwhile."""
    directory = tmp_path_factory.mktemp("cluster")
    with two_nodes(directory, postgres_server, postgres_template, redis_server) as (nodes, env):
        cluster = Cluster(nodes, postgres_server, redis_server, env, directory)
        try:
            cluster.start_front()
            yield cluster
        finally:
            if cluster.front is not None:
                cluster.front.stop()


def offer_campaign(alias: str, *, cap: int | None = None) -> tuple[int, int, int]:
    """A campaign whose offer has a daily cap (or none) and whose stream falls back to a spare offer:
    (campaign id, offer id, spare offer id)."""
    from models.admin.services import create_campaign, create_offer, update_stream
    from models.store.database import db

    offer = create_offer(db, f"{alias} offer", f"https://{alias}.example/?c={{subid}}", daily_cap=cap).id
    spare = create_offer(db, f"{alias} spare", f"https://spare-{alias}.example/?c={{subid}}").id
    campaign = create_campaign(db, alias, alias, offer_id=offer)
    update_stream(db, campaign.streams.get().id, fallback_offer_id=spare)
    return campaign.id, offer, spare


def subid_of(location: str) -> str:
    return parse_qs(urlsplit(location).query)["c"][0]


def visit(port: int, alias: str, ip: str, ua: str = "Mozilla/5.0 (X11) Firefox/120") -> tuple[int, str]:
    """One visitor's click straight to a node (its address in the header a trusted proxy sets)."""
    status, headers, _ = request(port, f"/{alias}", {"X-Real-IP": ip, "User-Agent": ua})
    return status, headers.get("location", "")


def postback(port: int, key: str, subid: str, tid: str = "t1") -> tuple[int, dict]:
    status, _, body = request(port, f"/{key}/postback?subid={subid}&tid={tid}&status=sale&payout=5")
    return status, json.loads(body)


def test_a_capped_offer_stops_at_exactly_its_cap_over_both_nodes(cluster):
    campaign, offer, spare = offer_campaign("capped", cap=CAP)
    before = cluster.positions()
    with Clicks(cluster.port, threads=8, path="/capped") as clicks:
        clicks.wait_for(3 * CAP)
    cluster.wait_landed()
    statuses = {status for status, _ in clicks.answers}
    assert statuses == {302}, clicks.answers[:5]
    subids = [subid_of(location) for _, location in clicks.answers]
    assert len(set(subids)) == len(subids)  # Each click a new visitor: a subid of its own.
    capped_answers = [location for _, location in clicks.answers if location.startswith("https://capped.")]
    assert len(capped_answers) == CAP
    stored = cluster.stored(campaign)
    assert sorted(subid for subid, _ in stored) == sorted(subids)  # Every 302's subid once, no other.
    offers = [offer_id for _, offer_id in stored]
    assert offers.count(offer) == CAP and offers.count(spare) == len(subids) - CAP
    # Both nodes took clicks (nginx has no stickiness) and landed them into their own rows.
    assert all(after > earlier for after, earlier in zip(cluster.positions(), before, strict=True))


def test_through_nginx_a_visitor_stays_on_one_node_and_a_node_taken_out_moves_its_visitors_safely(cluster):
    """Issue 33: nginx hashes the visitor (address and User-Agent) over the nodes, so a visitor's clicks
    reach one node, whose flusher keeps them in the node's own visitor file (asked instead of PostgreSQL
    for the visitor's landed history). A node taken out of the upstream moves its visitors to the other:
    each click still lands once, and a moved visitor counts unique on the new node once."""
    import sqlite3

    from models.store.database import db
    from models.store.nodevisitors import landed_visitors_path

    for alias in ("affa", "affb", "affc"):
        offer_campaign(alias)
    visitors = [f"Affinity {n}" for n in range(16)]

    def click(alias: str, ua: str) -> str:
        status, headers, _ = request(cluster.port, f"/{alias}", {"User-Agent": ua})
        assert status == 302, (status, cluster.logs())
        return subid_of(headers["location"])

    def held() -> list[set[str]]:
        """The subids in each node's visitor file."""
        subids = []
        for node in cluster.nodes:
            conn = sqlite3.connect(landed_visitors_path(node.spool_dir))
            try:
                subids.append({row[0] for row in conn.execute("SELECT subid FROM landed").fetchall()})
            finally:
                conn.close()
        return subids

    first = {ua: [click("affa", ua), click("affb", ua)] for ua in visitors}
    cluster.wait_landed()
    files = held()
    node_of = {}
    for ua, subids in first.items():
        nodes = [n for n, subids_held in enumerate(files) if set(subids) <= subids_held]
        assert len(nodes) == 1 and not any(set(subids) & files[1 - nodes[0]]), (ua, subids)
        node_of[ua] = nodes[0]
    assert set(node_of.values()) == {0, 1}  # 16 visitors hashed over both nodes.

    cluster.start_front(cluster.nodes[:1])  # node-b taken out of the upstream.
    try:
        moved = [ua for ua in visitors if node_of[ua] == 1]
        after = {ua: click("affc", ua) for ua in visitors}
        cluster.wait_landed()
    finally:
        cluster.start_front()
    files = held()
    assert set(after.values()) <= files[0] and not set(after.values()) & files[1]  # All on node-a now.
    placeholders = ", ".join(["%s"] * len(after))
    rows = db.execute_sql(
        f"SELECT subid, is_unique_global FROM click WHERE subid IN ({placeholders})", list(after.values())
    ).fetchall()
    assert sorted(row[0] for row in rows) == sorted(after.values())  # Each once.
    unique = {row[0]: row[1] for row in rows}
    # Node-a's own visitors were seen before; node-b's, moved, count unique on node-a once (its file and
    # journal have not seen them): the defined behaviour of a node leaving (docs/SCALING.md).
    assert moved and all(unique[after[ua]] == (1 if ua in moved else 0) for ua in visitors), unique


def test_a_visitor_through_nginx_within_debounce_gets_one_subid_and_one_click(cluster):
    """One visitor's clicks within debounce through nginx reach one node: one subid, one click. Sent to
    both nodes directly (as when a node leaves the upstream), each node answers from what it saw itself:
    a subid on each, both clicks landed, none twice (docs/SCALING.md, "Visitor affinity")."""
    campaign, *_ = offer_campaign("alternate")
    ua = "Mozilla/5.0 (X11) Alternate/1"
    answers = []
    for _ in range(4):
        status, headers, _ = request(cluster.port, "/alternate", {"User-Agent": ua})
        answers.append((status, headers.get("location", "")))
    assert {status for status, _ in answers} == {302}
    assert len({location for _, location in answers}) == 1  # The first click's subid and Location.
    a, b = (node.web.port for node in cluster.nodes)
    direct = [visit(port, "alternate", "198.51.100.20") for port in (a, b, a, b)]
    assert {status for status, _ in direct} == {302}
    assert direct[0] == direct[2] and direct[1] == direct[3] and direct[0] != direct[1]  # One a node.
    cluster.wait_landed()
    assert sorted(subid for subid, _ in cluster.stored(campaign)) == sorted(
        subid_of(location) for _, location in (answers[0], direct[0], direct[1])
    )


def test_a_whole_node_killed_mid_traffic_loses_no_click_once_it_restarts(cluster):
    from models.clicks.spool import spool_status
    from models.store.database import db

    campaign, *_ = offer_campaign("killed")
    killed = cluster.nodes[0]
    try:
        with Clicks(cluster.port, threads=4, path="/killed") as clicks:
            clicks.wait_for(60)
            killed.pause_worker()  # So that its spool holds clicks not landed when it dies.
            clicks.wait_for(clicks.count() + 60)
            killed.kill()  # Master, web and admin workers, and its `lanner worker`: nothing lands its spool.
            killed_at = clicks.count()
            unlanded = spool_status(db, killed.spool_dir).pending_clicks
            # The same data directory and node name, while the other node takes the clicks: its new
            # flusher lands what the dead one held.
            killed.start()
            clicks.wait_for(killed_at + 100)
    finally:
        killed.wait_listening(START_SECONDS)
        wait_healthy(killed.web, START_SECONDS)
        cluster.start_front()  # nginx in front of the node's new ports.
    assert unlanded > 0
    assert {status for status, _ in clicks.answers} == {302}, [a for a in clicks.answers if a[0] != 302][:5]
    subids = [subid_of(location) for _, location in clicks.answers]
    assert len(set(subids)) == len(subids)
    cluster.wait_landed()
    stored = [subid for subid, _ in cluster.stored(campaign)]
    assert len(set(stored)) == len(stored) and set(subids) <= set(stored)  # Each 302's subid, once.
    # A click the dead node journaled but never answered was retried on the other node: a click of
    # its own (debounce is each node's). At most one per client in flight.
    assert len(set(stored) - set(subids)) <= len(clicks.threads)


def test_identical_postbacks_on_both_nodes_at_once_make_one_conversion(cluster):
    campaign, *_ = offer_campaign("converted")
    status, location = visit(cluster.nodes[0].web.port, "converted", "198.51.100.30")
    subid = subid_of(location)
    cluster.wait_landed()
    key = cluster.postback_key()
    ports = [node.web.port for node in cluster.nodes]
    start = threading.Barrier(32)
    answers: list[tuple[int, dict]] = []

    def send(n: int) -> None:
        start.wait(timeout=20)
        answers.append(postback(ports[n % 2], key, subid))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [status for status, _ in answers] == [200] * 32
    verdicts = sorted(answer["verdict"] for _, answer in answers)
    assert verdicts == ["created"] + ["duplicate"] * 31, verdicts
    assert cluster.conversions(subid) == [("t1", "sale")]


def test_a_postback_for_a_click_in_another_nodes_spool_is_parked_and_matched_when_it_lands(cluster):
    campaign, *_ = offer_campaign("parked")
    holder, other = cluster.nodes
    holder.pause_worker()  # Its flusher lands nothing: the click stays in its spool.
    try:
        status, location = visit(holder.web.port, "parked", "198.51.100.40")
        subid = subid_of(location)
        status, answer = postback(other.web.port, cluster.postback_key(), subid)
        assert (status, answer["verdict"]) == (200, "parked")
        assert cluster.stored(campaign) == [] and cluster.conversions(subid) == []
    finally:
        holder.resume_worker()
    cluster.wait_landed()
    wait_until(lambda: cluster.conversions(subid), LAND_SECONDS, "the parked postback to be matched")
    assert cluster.conversions(subid) == [("t1", "sale")]
    assert [stored for stored, _ in cluster.stored(campaign)] == [subid]


# -- outages: these stop the run's PostgreSQL or Redis, and start it again ----------------------------


def test_while_postgresql_is_away_clicks_wait_in_the_spools_and_postbacks_get_503(cluster):
    campaign, *_ = offer_campaign("pgdown")
    (a, b), key = cluster.nodes, cluster.postback_key()
    # Landed before the outage; its postback comes during it. Node b has loaded the campaign now (a
    # worker routes from the campaigns it holds), and node a with the next click.
    status, location = visit(b.web.port, "pgdown", "198.51.100.50")
    before = subid_of(location)
    cluster.wait_landed()
    a.pause_worker()
    status, location = visit(a.web.port, "pgdown", "198.51.100.51")
    parked = subid_of(location)  # In node a's spool when PostgreSQL goes.
    assert postback(b.web.port, key, parked)[1]["verdict"] == "parked"
    cluster.postgres.pause()
    try:
        a.resume_worker()  # Its flusher now fails, and tries again.
        during = [visit(node.web.port, "pgdown", f"198.51.100.{60 + n}") for n, node in enumerate((a, b) * 5)]
        refused = [postback(node.web.port, key, before, tid="t2") for node in (a, b)]
        # Both nodes take every click: in rotation (a 200 that says why it is degraded), 503 only
        # for a monitor that asks strictly.
        health = [request(node.web.port, "/healthz") for node in (a, b)]
        strict = [request(node.web.port, "/healthz?strict=1")[0] for node in (a, b)]
        # Alive and ready (they journal every click); the dependency view and the metrics say why not ok.
        probes = [request(node.web.port, path)[0] for node in (a, b) for path in ("/livez", "/readyz")]
        metrics = [request(node.web.extra["admin_port"], "/metrics") for node in (a, b)]
        outage_status = run_lanner(a.environ, "status", "--json", check=False)
    finally:
        cluster.postgres.resume()
    assert probes == [200, 200, 200, 200]
    for node_clicks, (status, _, body) in zip((6, 5), health, strict=True):
        answer = json.loads(body)
        assert (status, answer.get("status")) == (200, "degraded"), body
        assert answer["database"].startswith("does not answer: "), body
        dependencies = answer["dependencies"]
        assert dependencies["database"]["state"] == "down" and dependencies["redis"]["state"] == "up", body
        spool = dependencies["spool"]
        assert spool["state"] == "up" and spool["counted_from"] == "flusher heartbeat", body
        # Counted from the flusher's last heartbeat: at least the clicks the node took since it landed.
        assert spool["pending_clicks"] >= node_clicks and spool["oldest_s"] >= 0, body
        # The consumer judged by its heartbeat, the backlog's age from it too (node a's was stopped a while).
        assert dependencies["consumer"]["state"] != "unknown", body
        assert answer["consumer"]["lag_s"] is not None, body
    assert json.loads(health[1][2])["dependencies"]["consumer"]["state"] == "up"
    assert strict == [503, 503]
    for status, _, body in metrics:
        text = body.decode()
        assert status == 200 and 'lanner_dependency_up{dependency="database"} 0' in text, text
        assert 'lanner_dependency_up{dependency="spool"} 1' in text, text
        pending = re.search(r"^lanner_spool_pending_clicks (\d+)$", text, re.MULTILINE)
        assert pending and int(pending.group(1)) >= 5, text
        assert "lanner_postbacks_parked" not in text.replace("# HELP lanner_postbacks_parked", ""), text
    shown = json.loads(outage_status.stdout)
    assert outage_status.returncode == 1 and shown["postgresql"]["state"] == "unreachable", shown
    assert shown["spool"]["pending_clicks"] >= 6 and shown["spool"]["oldest_s"] >= 0, shown
    assert {status for status, _ in during} == {302}, during
    assert [status for status, _ in refused] == [503, 503], refused
    cluster.wait_landed()
    subids = [parked] + [subid_of(location) for _, location in during]
    assert sorted(subid for subid, _ in cluster.stored(campaign)) == sorted([before] + subids)
    wait_until(lambda: cluster.conversions(parked), LAND_SECONDS, "the parked postback to be matched")
    assert cluster.conversions(parked) == [("t1", "sale")]
    status, answer = postback(b.web.port, key, before, tid="t2")  # The network retries its 503.
    assert (status, answer["verdict"]) == (200, "created")
    assert cluster.conversions(before) == [("t2", "sale")]


def test_while_redis_is_away_clicks_land_and_a_capped_offer_gets_none(cluster):
    campaign, offer, spare = offer_campaign("redisdown", cap=5)
    a, b = cluster.nodes
    cluster.redis.pause()
    try:
        during = [visit(node.web.port, "redisdown", f"198.51.101.{n}") for n, node in enumerate((a, b) * 5)]
        # Each node's one web worker has found Redis away: ready, and its dependency view says so.
        ready = [request(node.web.port, "/readyz")[0] for node in (a, b)]
        health = [json.loads(request(node.web.port, "/healthz")[2]) for node in (a, b)]
    finally:
        cluster.redis.resume()  # Empty, as a Redis without persistence comes back.
    assert ready == [200, 200]
    for answer in health:
        redis = answer["dependencies"]["redis"]
        assert answer["status"] == "degraded" and redis["state"] == "down", answer
        assert redis["clicks_alone"] >= 5 and answer["dependencies"]["database"]["state"] == "up", answer
    assert {status for status, _ in during} == {302}, during
    # Never over the cap: without Redis's count every capped offer counts as full.
    assert all(location.startswith("https://spare-redisdown.") for _, location in during), during
    after: list[tuple[int, str]] = []

    def capped_again() -> bool:  # Each node asks Redis again a second after it found it away.
        node = (a, b)[len(after) % 2]
        n = len(after)
        after.append(visit(node.web.port, "redisdown", f"198.51.{102 + n // 250}.{n % 250 + 1}"))
        return after[-1][1].startswith("https://redisdown.")

    wait_until(capped_again, LAND_SECONDS, "a click on the capped offer", cluster.logs)
    after += [visit(node.web.port, "redisdown", f"198.51.110.{n}") for n, node in enumerate((a, b) * 5)]
    assert {status for status, _ in after} == {302}
    cluster.wait_landed()
    stored = cluster.stored(campaign)
    answered = [subid_of(location) for _, location in during + after]
    assert sorted(subid for subid, _ in stored) == sorted(answered)
    # The counters Redis lost were seeded from PostgreSQL and the nodes' unlanded clicks: exactly the cap.
    assert [offer_id for _, offer_id in stored].count(offer) == 5
