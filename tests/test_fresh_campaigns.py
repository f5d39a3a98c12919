"""A campaign answers the moment it is created; unknown aliases cost a bounded number of reads."""

from __future__ import annotations

import threading

from conftest import click

from models.admin.services import create_campaign
from models.clicks.tracker import MISS_CHECK_EVERY
from models.store.meta import MetaStore


def count_version_reads(monkeypatch) -> list[str]:
    """Every read of config_version from now on (through any MetaStore: its PostgreSQL sibling inherits
    it)."""
    reads: list[str] = []
    read = MetaStore.config_version

    def counted(store):
        reads.append(store.SQL_CONFIG_VERSION)
        return read(store)

    monkeypatch.setattr(MetaStore, "config_version", counted)
    return reads


def test_a_campaign_created_a_moment_ago_is_found_at_once(db, make_tracker, clock):
    tracker = make_tracker()
    assert tracker.campaign("fresh") is None
    create_campaign(db, "Fresh", "fresh", offer_url="https://offer.example/?c={subid}")
    clock.advance(MISS_CHECK_EVERY)  # Well before the periodic refresh (1 s).
    assert tracker.campaign("fresh") is not None


def test_a_campaign_created_while_the_configuration_is_read_is_never_half_loaded(
    db, make_tracker, clock, monkeypatch
):
    tracker = make_tracker()
    create_campaign(db, "First", "first", offer_url="https://first.example/?c={subid}")
    created = []
    reader = threading.current_thread()
    execute_sql = db.obj.execute_sql

    def create_midway(
        sql: str, *args, **kwargs
    ):  # Commits between the reads of the streams and the campaigns.
        if (
            threading.current_thread() is reader
            and not created
            and sql.startswith("SELECT")
            and 'FROM "campaign"' in sql
        ):
            writer = threading.Thread(
                target=lambda: created.append(
                    create_campaign(db, "Midway", "midway", offer_url="https://midway.example/?c={subid}")
                )
            )
            writer.start()
            writer.join()
        return execute_sql(sql, *args, **kwargs)

    with monkeypatch.context() as patch:  # Every peewee query of the tracker's reload passes here.
        patch.setattr(db.obj, "execute_sql", create_midway)
        clock.advance(MISS_CHECK_EVERY)
        assert tracker.campaign("first") is not None
    assert created
    clock.advance(MISS_CHECK_EVERY)
    midway = tracker.campaign("midway")
    assert midway is not None and len(midway.streams) == 1, midway


def test_a_scan_of_random_aliases_reads_the_config_version_a_bounded_number_of_times(
    db, make_tracker, clock, monkeypatch
):
    tracker = make_tracker()
    reads = count_version_reads(monkeypatch)
    for n in range(1000):  # At one instant: one look.
        assert tracker.campaign(f"scan-{n}") is None
    assert len(reads) == 1
    del reads[:]
    for n in range(1000):  # Over one second: every 50 ms, plus the periodic refresh.
        clock.advance(0.001)
        assert tracker.campaign(f"scan-{n}") is None
    assert len(reads) <= 1000 // 50 + 2, len(reads)


def test_the_request_right_after_creating_a_campaign_gets_its_redirect(db, server):
    create_campaign(db, "Busy", "busy", offer_url="https://busy.example/?c={subid}")
    stop = threading.Event()

    def keep_workers_refreshing() -> None:  # Traffic on another campaign: each worker looked just now.
        n = 0
        while not stop.is_set():
            click(server.port, "busy", ip=f"198.51.100.{n % 250 + 1}")
            n += 1

    clicker = threading.Thread(target=keep_workers_refreshing, daemon=True)
    clicker.start()
    try:
        for n in range(5):
            create_campaign(db, f"New {n}", f"new-{n}", offer_url=f"https://new{n}.example/?c={{subid}}")
            status, headers, _ = click(server.port, f"new-{n}")
            assert status == 302, (n, status)
            assert headers["location"].startswith(f"https://new{n}.example/")
    finally:
        stop.set()
        clicker.join(timeout=20)
