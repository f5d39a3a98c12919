"""Nodes (migration 0012, models/clicks/node.py): each spool lands under its own name and position,
and a spool never lands into another spool's position."""

from __future__ import annotations

import time

import pytest
from conftest import run_lanner

from models.admin.services import create_campaign
from models.clicks.landing import SpoolLanding
from models.clicks.node import (
    NODE_FILE,
    NodeMismatch,
    ensure_spool_node,
    refuse_a_second_node_alone,
    spool_node,
)
from models.clicks.spool import SpoolClaimed, flush_spool, read_position
from models.clicks.visit import Visit
from models.store.clicks import ClickStore
from workers.ops.status import collect_status

OFFER = "https://offer.example/?s={subid}"


def track(tracker, n: int):
    tracker.refresh()
    return tracker.track(tracker.campaign("n"), Visit(ip=f"192.0.2.{n}", user_agent="Mozilla/5.0 node"))


def test_a_spool_keeps_the_name_it_was_first_given_and_refuses_another(tmp_path):
    spool = tmp_path / "spool"
    assert spool_node(spool).name == "main" and not spool_node(spool).spool_id  # No file: `main`, unclaimed.
    first = ensure_spool_node(spool, "east-1")
    assert (spool / NODE_FILE).read_text().split() == [first.name, first.spool_id]
    assert ensure_spool_node(spool, "east-1") == first
    with pytest.raises(NodeMismatch, match="belongs to node 'east-1', not 'west-2'"):
        ensure_spool_node(spool, "west-2")


def test_two_nodes_on_one_database_land_their_own_spools_each_at_its_own_position(db, make_tracker, tmp_path):
    create_campaign(db, "Nodes", "n", offer_url=OFFER)
    spools = {name: tmp_path / name / "spool" for name in ("east", "west")}
    for name, spool in spools.items():
        ensure_spool_node(spool, name)
    east, west = (make_tracker(spool_dir=spool) for spool in spools.values())
    subids = [track(east, n).subid for n in range(5)] + [track(west, n).subid for n in range(5, 12)]

    assert flush_spool(db, spools["east"], 1 << 20).inserted == 5
    assert read_position(db, spools["west"]) == (1, 0)  # West has landed nothing yet.
    assert flush_spool(db, spools["west"], 1 << 20).inserted == 7
    assert flush_spool(db, spools["east"], 1 << 20).inserted == 0  # Exactly once.
    stored = {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()}
    assert stored == set(subids)
    nodes = {row[0]: row for row in ClickStore(db.connection()).nodes()}
    assert set(nodes) == {"main", "east", "west"}  # `main`: the position 0012 moved, unused here.
    assert read_position(db, spools["east"])[1] > 0 and read_position(db, spools["west"])[1] > 0
    assert read_position(db, spools["east"]) != read_position(db, spools["west"])


def test_a_second_spool_under_a_name_already_landing_is_refused_and_lands_nothing(db, make_tracker, tmp_path):
    create_campaign(db, "Nodes", "n", offer_url=OFFER)
    first, second = tmp_path / "a" / "spool", tmp_path / "b" / "spool"
    ensure_spool_node(first, "edge")
    ensure_spool_node(second, "edge")  # Another host given the same LANNER_NODE_ID.
    track(make_tracker(spool_dir=first), 1)
    track(make_tracker(spool_dir=second), 2)
    assert flush_spool(db, first, 1 << 20).inserted == 1
    with pytest.raises(SpoolClaimed, match="two hosts share LANNER_NODE_ID=edge"):
        flush_spool(db, second, 1 << 20)
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone() == (1,)


def test_the_heartbeat_shows_every_node_in_lanner_status(db, settings, make_tracker, tmp_path):
    create_campaign(db, "Nodes", "n", offer_url=OFFER)
    other = tmp_path / "other" / "spool"
    ensure_spool_node(settings.spool_dir, "main")
    ensure_spool_node(other, "edge")
    track(make_tracker(spool_dir=other), 3)  # Waits in edge's spool.
    for spool in (settings.spool_dir, other):
        SpoolLanding(db, spool, settings.spool_segment_bytes, bot_ips=(), park_ms=0).beat()
    nodes = {row["node"]: row for row in collect_status(settings, db)["nodes"]}
    assert set(nodes) == {"main", "edge"}
    assert nodes["edge"]["unlanded_bytes"] > 0 and nodes["main"]["unlanded_bytes"] == 0
    assert nodes["edge"]["heartbeat_s_ago"] is not None and nodes["edge"]["host"]


def test_lanner_worker_refuses_a_node_id_the_spool_was_not_given(lanner, env, settings):
    ensure_spool_node(settings.spool_dir, "main")
    result = run_lanner({**env, "LANNER_NODE_ID": "west"}, "worker", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "belongs to node 'main', not 'west'" in result.stderr


def test_0012_moves_the_single_position_to_the_node_main(settings):
    from models.migrations.runner import migrate
    from models.store.database import db as database
    from models.store.database import open_database

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0011_country_rollups")
        database.execute_sql("UPDATE spool_position SET segment = 7, byte_offset = 1234, updated_at = 99")
        assert migrate(database, up_to="0012_spool_nodes") == ["0012_spool_nodes"]
        assert ClickStore(database.connection()).position("main") == (7, 1234)
        assert database.execute_sql("SELECT name, spool_id, updated_at FROM spool_node").fetchall() == [
            ("main", "", 99)
        ]
    finally:
        database.close()


def test_a_second_live_node_without_redis_is_refused_at_start(lanner, env, settings, db, tmp_path):
    from models.store.database import write_tx

    with write_tx(db):  # Node `east` beat a moment ago.
        ClickStore(db.connection()).beat("east", int(time.time() * 1000), "host-east", 0, 0)
    result = run_lanner({**env, "LANNER_NODE_ID": "west"}, "worker", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Node 'east' (host-east) is running on this database too" in result.stderr
    assert "LANNER_REDIS_URL" in result.stderr
    with write_tx(db):  # A node gone for minutes does not count.
        ClickStore(db.connection()).beat("east", int(time.time() * 1000) - 600_000, "host-east", 0, 0)
    refuse_a_second_node_alone(db, "west")


def test_a_dead_nodes_spool_lands_from_another_host_with_data_dir(db, lanner, make_tracker, env, tmp_path):
    create_campaign(db, "Nodes", "n", offer_url=OFFER)
    dead = tmp_path / "dead-node"  # Its disk, mounted on this host.
    ensure_spool_node(dead / "spool", "edge")
    subids = {track(make_tracker(spool_dir=dead / "spool"), n).subid for n in range(4)}

    status = lanner("spool", "status", "--data-dir", str(dead), "--json")
    assert '"pending_clicks": 4' in status.stdout
    assert "Inserted 4," in lanner("spool", "flush", "--data-dir", str(dead)).stdout
    assert "Inserted 0," in lanner("spool", "flush", "--data-dir", str(dead)).stdout  # Exactly once.
    stored = {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()}
    assert stored == subids
    nodes = {row[0] for row in ClickStore(db.connection()).nodes()}
    assert "edge" in nodes  # Under the dead node's own name, not this host's.
    missing = lanner("spool", "flush", "--data-dir", str(tmp_path / "nowhere"), check=False)
    assert missing.returncode == 1 and "holds no spool directory" in missing.stderr
