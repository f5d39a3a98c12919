"""Segments deleted by hand before they landed are restored from a descriptor still open on them.

Real files, a real migrated database; real `lanner serve` and `lanner worker` processes where the
web workers and the flusher are the subject.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from typing import Self

from conftest import click, subid_of, wait_until
from test_spool_faults import OFFER, stored_subids

from models.admin.services import create_campaign, create_offer, update_stream
from models.clicks.record import SUBID, decode_line
from models.clicks.spool import (
    MISSING_FILE,
    HeldSegments,
    flush_spool,
    list_segments,
    read_missing_segments,
    read_position,
    remove_flushed_segments,
    segment_path,
    spool_status,
)
from models.clicks.visit import Visit


def track(tracker, alias: str, ip: str, ua: str = "Mozilla/5.0 recovery"):
    tracker.refresh()
    return tracker.track(tracker.campaign(alias), Visit(ip=ip, user_agent=ua))


def test_a_cap_stays_exact_and_uniqueness_unchanged_across_a_deleted_active_segment(
    make_tracker, db, settings, clock
):
    """Both workers read the restored lines before the deletion: each must count them once, not again."""
    capped = create_offer(db, "Capped", "https://capped.example/?c={subid}", total_cap=12).id
    spare = create_offer(db, "Spare", "https://spare.example/?c={subid}").id
    create_campaign(db, "Cap", "cap", offer_id=capped)
    first, second = make_tracker(rng=random.Random(1)), make_tracker(rng=random.Random(2))
    update_stream(db, first.campaign("cap").regular[0].id, fallback_offer_id=spare)
    workers = (first, second)
    got = Counter()
    for n in range(10):
        got[track(workers[n % 2], "cap", f"192.0.2.{n}").offer_id] += 1
        if n == 5:
            flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)  # 4 left in the file only.
    segment_path(settings.spool_dir, 1).unlink()
    clock.advance(5)  # Past the debounce window: a visitor back is a new, not unique, click.
    later = [track(workers[n % 2], "cap", f"192.0.2.{n}", ua="later") for n in range(10, 24)]
    got.update(decision.offer_id for decision in later)
    assert got == {capped: 12, spare: 12}
    assert list_segments(settings.spool_dir) == [1]  # Restored by the first worker to append.
    # Visitors whose clicks were in the file only, back through another worker than their first.
    back = [
        track(make_tracker(), "cap", "192.0.2.8"),
        track(first, "cap", "192.0.2.9"),
        track(second, "cap", "192.0.2.6"),
    ]
    assert [(d.is_repeat, d.is_unique_global, d.is_unique_campaign, d.is_unique_stream) for d in back] == [
        (False, False, False, False)
    ] * 3
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    stored = db.connection().execute("SELECT COUNT(*) FROM click WHERE offer_id = ?", (capped,)).fetchone()[0]
    counted = (
        db.connection()
        .execute("SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer' AND ref_id = ?", (capped,))
        .fetchone()[0]
    )
    assert stored == counted == 12
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == 27
    assert spool_status(db, settings.spool_dir).missing_segments == []


def test_a_worker_that_reaches_a_restored_segment_from_its_start_skips_the_landed_part(
    make_tracker, db, settings, clock
):
    """Only the unlanded part is restored, at its own offsets: before it is a hole of zeros."""
    create_campaign(db, "Hole", "hole", offer_url=OFFER)
    busy = make_tracker(segment_bytes=4000)
    idle = make_tracker(segment_bytes=4000)  # Stays in segment 1 while the others move on.
    subids = [track(busy, "hole", f"192.0.2.{n}").subid for n in range(30)]
    assert list_segments(settings.spool_dir)[-1] >= 2 and idle.journal.segment == 1
    flush_spool(db, settings.spool_dir, 4000)
    active = list_segments(settings.spool_dir)[-1]
    subids += [track(busy, "hole", f"192.0.3.{n}").subid for n in range(2)]
    remove_flushed_segments(db, settings.spool_dir)
    path = segment_path(settings.spool_dir, active)
    landed = read_position(db, settings.spool_dir)[1]
    assert read_position(db, settings.spool_dir)[0] == active and 0 < landed < path.stat().st_size
    path.unlink()
    subids.append(track(busy, "hole", "192.0.3.9").subid)  # Restores it.
    assert path.read_bytes()[:landed] == b"\0" * landed
    clock.advance(5)
    again = track(idle, "hole", "192.0.3.0")  # Reads segments 1 to the restored one from 0.
    assert idle.journal.segment == active and (again.is_repeat, again.is_unique_campaign) == (False, False)
    assert track(idle, "hole", "192.0.2.29").is_unique_campaign is False  # In the database.
    subids.append(again.subid)
    result = flush_spool(db, settings.spool_dir, 4000)
    assert (result.rejected, result.duplicates) == (0, 0)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} >= set(subids)


def test_the_flusher_restores_a_sealed_segment_deleted_before_it_landed(make_tracker, db, settings, caplog):
    create_campaign(db, "Sealed", "sealed", offer_url=OFFER)
    tracker = make_tracker(segment_bytes=2000)
    subids = [track(tracker, "sealed", f"192.0.2.{n}").subid for n in range(3)]
    held = HeldSegments()
    try:
        flush_spool(db, settings.spool_dir, 2000, held=held)  # Lands them and holds segment 1 open.
        subids += [track(tracker, "sealed", f"192.0.2.{n}").subid for n in range(3, 40)]
        assert len(list_segments(settings.spool_dir)) >= 4
        segment_path(settings.spool_dir, 1).unlink()  # Sealed, part of it not landed.
        result = flush_spool(db, settings.spool_dir, 2000, held=held)
        assert result.inserted == 37 and result.rejected == 0
        assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
        assert "spool segment 1 was deleted before it landed: restored its" in caplog.text
        assert spool_status(db, settings.spool_dir).missing_segments == []
        (noted,) = read_missing_segments(settings.spool_dir)
        assert (noted.segment, noted.lost) == (1, 0)
        # Landed segments' descriptors are closed: only the one the flusher is in stays held.
        remove_flushed_segments(db, settings.spool_dir)
        flush_spool(db, settings.spool_dir, 2000, held=held)
        assert list(held._held) == [read_position(db, settings.spool_dir)[0]]
    finally:
        held.close()
    assert (settings.spool_dir / MISSING_FILE).exists()


class ClickStream:
    """Threads clicking a campaign at a steady pace; every answer kept as (began, status, subid)."""

    def __init__(self, port: int, alias: str, threads: int = 4, per_second: float = 40) -> None:
        self.port, self.alias, self.pause = port, alias, 1 / per_second
        self.results: list[tuple[float, int, str]] = []
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(threads)]

    def run(self, n: int) -> None:
        i = 0
        while not self.stopping.is_set():
            i += 1
            began = time.monotonic()
            status, headers, _ = click(self.port, self.alias, ip=f"100.64.{n}.{i % 250 + 1}", ua=f"s {n} {i}")
            self.results.append((began, status, subid_of(headers["location"]) if status == 302 else ""))
            self.stopping.wait(self.pause)

    def __enter__(self) -> Self:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def wait_for(self, count: int, since: float = 0.0, deadline_seconds: float = 60) -> None:
        deadline = time.monotonic() + deadline_seconds
        while len([r for r in self.results if r[0] > since]) < count:
            assert time.monotonic() < deadline, f"only {len(self.results)} clicks answered"
            time.sleep(0.05)


def held_segments(pid: int) -> set[int]:
    """The spool segments a process has open (deleted ones too)."""
    numbers = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # Closed meanwhile.
        name = os.path.basename(target.removesuffix(" (deleted)"))
        if name.startswith("clicks.") and name.endswith(".log"):
            numbers.add(int(name.split(".")[1]))
    return numbers


def wait_until_landed(settings, served: list[str], consumer, deadline_seconds: float = 60) -> set[str]:
    deadline = time.monotonic() + deadline_seconds
    while not set(served) <= (stored := stored_subids()):
        assert consumer.process.poll() is None, consumer.log
        assert time.monotonic() < deadline, f"{len(set(served) - stored)} of {len(served)} not landed"
        time.sleep(0.2)
    return stored


def position() -> tuple[int, int]:
    """The flusher's spool position, read on this test's own connection (either backend)."""
    from models.store.database import db

    return (
        db.connection().execute("SELECT segment, byte_offset FROM spool_node WHERE name = 'main'").fetchone()
    )


def test_a_real_tracker_loses_no_click_when_its_active_segment_is_deleted(
    lanner, start_server, start_consumer, settings
):
    lanner("campaign", "create", "A", "--alias", "a", "--offer-url", OFFER)
    server = start_server(workers=2)
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="1")  # Lagging a little: unlanded lines at any time.
    with ClickStream(server.port, "a") as stream:
        stream.wait_for(300)
        wait_until_landed(settings, [stream.results[0][2]], consumer)
        # Unlanded lines in the segment when it goes: the flusher paused while more clicks arrive (a
        # flusher that has just caught up on a slow box left none, and nothing to restore).
        os.kill(consumer.process.pid, signal.SIGSTOP)
        try:
            stream.wait_for(20, since=time.monotonic())
            segment_path(settings.spool_dir, 1).unlink()
        finally:
            os.kill(consumer.process.pid, signal.SIGCONT)
        stream.wait_for(300, since=time.monotonic())
    assert all(status == 302 for _, status, _ in stream.results), server.log
    served = [subid for _, _, subid in stream.results]
    stored = wait_until_landed(settings, served, consumer)
    assert len(stored) == len(served) == len(set(served))  # Each once, and nothing else.
    logs = server.log + consumer.log
    assert "spool segment 1 was deleted" in logs and "restored its" in logs, logs
    assert "are lost" not in logs and "Traceback" not in logs
    status = lanner("spool", "status", "--json", check=False)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)[0]["missing_segments"] == []


def test_a_sealed_segment_deleted_while_the_flusher_is_paused_lands_when_it_resumes(
    lanner, start_server, start_consumer, settings
):
    small = {"LANNER_SPOOL_SEGMENT_BYTES": "32768"}
    lanner("campaign", "create", "S", "--alias", "s", "--offer-url", OFFER)
    server = start_server(workers=2, **small)
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1", **small)
    pid = consumer.process.pid
    deadline = time.monotonic() + 60
    with ClickStream(server.port, "s") as stream:
        stream.wait_for(100)
        while True:
            # Paused while it holds the newest segment open, and the segment is not sealed yet.
            while list_segments(settings.spool_dir)[-1] not in held_segments(pid):
                assert time.monotonic() < deadline, consumer.log
                time.sleep(0.05)
            os.kill(pid, signal.SIGSTOP)
            segment, _ = position()
            candidates = sorted(n for n in held_segments(pid) if n >= segment)
            target = candidates[-1]
            size = segment_path(settings.spool_dir, target).stat().st_size
            if size < 32768:
                break
            os.kill(pid, signal.SIGCONT)  # Sealed just before the pause: try again.
            assert time.monotonic() < deadline
        try:
            while list_segments(settings.spool_dir)[-1] <= target:  # Sealed while the flusher is paused.
                assert time.monotonic() < deadline, server.log
                time.sleep(0.05)
            segment, offset = position()
            held_part = offset if segment == target else 0
            lines = segment_path(settings.spool_dir, target).read_bytes()[held_part:]
            segment_path(settings.spool_dir, target).unlink()
            assert lines.count(b"\n") > 0
            stream.wait_for(100, since=time.monotonic())
        finally:
            os.kill(pid, signal.SIGCONT)
    served = [subid for _, _, subid in stream.results]
    assert all(status == 302 for _, status, _ in stream.results), server.log
    assert {decode_line(line)[SUBID] for line in lines.splitlines(keepends=True)} <= set(served)
    stored = wait_until_landed(settings, served, consumer)
    assert len(stored) == len(served) == len(set(served))
    # By the flusher, or by a web worker that kept it open too (whichever looked first).
    assert f"spool segment {target} was deleted before it landed: restored its" in server.log + consumer.log
    status = lanner("spool", "status", "--json", check=False)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)[0]["missing_segments"] == []


def test_a_web_worker_restores_a_sealed_segment_it_left_that_is_deleted_before_it_landed(
    make_tracker, db, settings, clock, caplog
):
    create_campaign(db, "Kept", "kept", offer_url=OFFER)
    tracker = make_tracker(segment_bytes=2000)
    subids = [track(tracker, "kept", f"192.0.2.{n}").subid for n in range(30)]
    assert len(list_segments(settings.spool_dir)) >= 3
    segment_path(settings.spool_dir, 2).unlink()  # Sealed, left by the worker, nothing landed.
    clock.advance(2)  # The worker's next look at the flushed position (once a second).
    subids.append(track(tracker, "kept", "192.0.2.99").subid)
    assert "spool segment 2 was deleted before it landed: restored its" in caplog.text
    result = flush_spool(db, settings.spool_dir, 2000)
    assert (result.inserted, result.rejected) == (31, 0)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
    assert spool_status(db, settings.spool_dir).missing_segments == []
    # Landed: the worker closes what it kept.
    clock.advance(2)
    track(tracker, "kept", "192.0.2.100")
    assert tracker.journal._sealed == {}


def test_a_sealed_segment_the_paused_flusher_never_saw_is_restored_by_a_web_worker(
    lanner, start_server, start_consumer, settings
):
    """`lanner bench faults`' deleted-sealed-segment: sealed after the pause, deleted, resumed at once."""
    small = {"LANNER_SPOOL_SEGMENT_BYTES": "32768"}
    lanner("campaign", "create", "W", "--alias", "w", "--offer-url", OFFER)
    server = start_server(workers=2, **small)
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1", **small)
    pid = consumer.process.pid
    deadline = time.monotonic() + 60
    with ClickStream(server.port, "w") as stream:
        stream.wait_for(100)
        # The flusher holds the segments it has listed: wait for its first round (a slow start, a busy box).
        wait_until(lambda: held_segments(pid), 30, "the flusher's first round", consumer.log)
        os.kill(pid, signal.SIGSTOP)
        try:
            held = held_segments(pid)
            while not (sealed := [n for n in list_segments(settings.spool_dir)[:-1] if n > max(held)]):
                assert time.monotonic() < deadline, server.log
                time.sleep(0.05)
            segment_path(settings.spool_dir, sealed[0]).unlink()
        finally:
            os.kill(pid, signal.SIGCONT)
        stream.wait_for(100, since=time.monotonic())
    served = [subid for _, _, subid in stream.results]
    assert all(status == 302 for _, status, _ in stream.results), server.log
    stored = wait_until_landed(settings, served, consumer)
    assert len(stored) == len(served) == len(set(served))
    assert f"spool segment {sealed[0]} was deleted before it landed: restored its" in server.log
    status = lanner("spool", "status", "--json", check=False)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)[0]["missing_segments"] == []


def test_a_sealed_segment_nobody_had_open_is_reported_lost_after_the_flushers_grace(
    make_tracker, db, settings, caplog
):
    create_campaign(db, "Gone", "gone", offer_url=OFFER)
    tracker = make_tracker(segment_bytes=2000)
    subids = [track(tracker, "gone", f"192.0.2.{n}").subid for n in range(30)]
    tracker.close()  # Its web worker is gone too: nobody has the files open.
    deleted = segment_path(settings.spool_dir, 2)
    lost = {subid for subid in subids if subid.encode() in deleted.read_bytes()}
    deleted.unlink()
    held = HeldSegments(grace_seconds=1.0)
    try:
        flush_spool(db, settings.spool_dir, 2000, held=held)  # Segment 1; waits at 2 for a restore.
        assert (
            read_position(db, settings.spool_dir)[0] == 2 and not (settings.spool_dir / MISSING_FILE).exists()
        )
        deadline = time.monotonic() + 30
        while read_position(db, settings.spool_dir)[0] == 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
            flush_spool(db, settings.spool_dir, 2000, held=held)
    finally:
        held.close()
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids) - lost
    assert "spool segment 2 is missing when the flusher got to it" in caplog.text
    assert spool_status(db, settings.spool_dir).missing_segments == [2]
