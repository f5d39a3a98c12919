"""The spool under damage: corrupt lines that still parse, segments deleted or moved by hand.

Real files, a real migrated database, a real `lanner serve` where web workers are the subject.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from conftest import click, run_lanner, subid_of
from test_click_http import web_workers

from models.clicks.record import (
    LINE_COLUMNS,
    OFFER_ID,
    STREAM_ID,
    decode_line,
    encode_line,
    line_tail,
    new_subid,
    peek_counted,
    peek_line,
    peek_visitor,
    visitor_key,
)
from models.clicks.spool import (
    MISSING_FILE,
    REJECTED_FILE,
    flush_spool,
    list_segments,
    segment_path,
    spool_status,
)
from models.clicks.visit import Visit

OFFER = "https://offer.example/lp?click={subid}"
TWENTY_DIGITS = b"9" * 20


def field(column: str) -> int:
    return LINE_COLUMNS.index(column)


def journal_line(**changes: bytes) -> bytes:
    """A valid journal line of stream 1 / offer 1, with some fields replaced by raw bytes."""
    texts = ["Mozilla/5.0 poison", "", "", "", *[""] * 30, *[""] * 9, OFFER]
    line = encode_line(
        "192.0.2.1", 7, 1_800_000_000_000, (1, 1, 1), line_tail(new_subid(), 1, 1, 1, 0.0, 0, texts)
    )
    fields = line[:-1].split(b"\t")
    for column, value in changes.items():
        fields[field(column)] = value
    return b"\t".join(fields) + b"\n"


def stored_subids() -> set[str]:
    """The subids in the database, read on this test's own connection (either backend)."""
    from models.store.database import db

    return {row[0] for row in db.connection().execute("SELECT subid FROM click").fetchall()}


def poison(line: bytes) -> list[bytes]:
    """The issue's two lines: a real click line with a 20-digit created_at, and one with a 20-digit
    ua_hash."""
    fields = line[:-1].split(b"\t")
    lines = []
    for column in ("created_at", "ua_hash"):
        bad = list(fields)
        bad[field(column)] = TWENTY_DIGITS
        bad[field("subid")] = new_subid().encode()
        lines.append(b"\t".join(bad) + b"\n")
    return lines


HEAD_DAMAGE = [
    ("created_at", TWENTY_DIGITS),
    ("created_at", b"1800000000"),  # Seconds, not ms.
    ("created_at", b"-1"),
    ("ua_hash", TWENTY_DIGITS),
    ("ua_hash", b"4294967296"),
    ("ua_hash", b"-1"),
    ("ip", b"999.1.1.1"),
    ("ip", b"not-an-address"),
]
TAIL_DAMAGE = [
    ("is_unique_global", b"2"),
    ("is_unique_stream", b"-1"),
    ("subid", b"not a subid"),
    ("subid", b"SUBIDINCAPITALS00"),
    ("campaign_id", b"0"),
    ("campaign_id", TWENTY_DIGITS),
    ("stream_id", TWENTY_DIGITS),
    ("stream_id", b"-5"),
    ("offer_id", b"0"),
    ("cost", b"nan"),
    ("cost", b"inf"),
    ("cost", b"-1.0"),
    ("cost", b"1e300"),
    ("is_bot", b"2"),
    ("is_bot", b"-2"),
]


def test_a_valid_line_decodes():
    record = decode_line(journal_line())
    assert record[1] == 1_800_000_000_000 and peek_counted(journal_line())[3:] == (1, 1, 1)


@pytest.mark.parametrize(("column", "value"), HEAD_DAMAGE + TAIL_DAMAGE)
def test_a_line_holding_a_value_no_click_has_is_refused(column, value):
    line = journal_line(**{column: value})
    with pytest.raises(ValueError, match=column):
        decode_line(line)
    if (column, value) in HEAD_DAMAGE:
        with pytest.raises(ValueError):
            peek_line(line)
    if column in ("stream_id", "offer_id", "campaign_id") or (column, value) in HEAD_DAMAGE:
        with pytest.raises(ValueError):
            peek_counted(line)
        with pytest.raises(ValueError):  # Another worker's line: neither indexed nor counted.
            peek_visitor(line)


@pytest.mark.parametrize("ip", ["192.0.2.1", "2001:db8::7", "::ffff:192.0.2.1"])
@pytest.mark.parametrize(("stream", "offer"), [(b"1", b"1"), (b"", b""), (b"3", b"")])
def test_another_workers_line_is_peeked_as_it_decodes(ip, stream, offer):
    line = journal_line(ip=ip.encode(), stream_id=stream, offer_id=offer)
    record = decode_line(line)
    key, created_at, campaign_id, stream_id, offer_id, lander_subid = peek_visitor(line)
    assert key == visitor_key(ip, 7)
    assert (created_at, campaign_id) == (1_800_000_000_000, 1)
    assert (
        (stream_id, offer_id)
        == (record[STREAM_ID], record[OFFER_ID])
        == (
            int(stream) if stream else None,
            int(offer) if offer else None,
        )
    )
    assert peek_counted(line) == (ip, 7, created_at, campaign_id, stream_id, offer_id)
    assert lander_subid is None


def test_poisoned_lines_stop_neither_a_worker_nor_the_flusher(make_tracker, db, settings, caplog):
    from models.admin.services import create_campaign

    create_campaign(db, "Test", "test", offer_url=OFFER)
    tracker = make_tracker()
    campaign = tracker.campaign("test")
    subids = [tracker.track(campaign, Visit(ip="198.51.100.1", user_agent="first")).subid]
    path = segment_path(settings.spool_dir, 1)
    bad = poison(path.read_bytes())
    with open(path, "ab") as journal:
        journal.writelines(bad)
    # The running worker reads them under the lock; a worker starting now replays them.
    subids.append(tracker.track(campaign, Visit(ip="198.51.100.2", user_agent="second")).subid)
    other = make_tracker()
    subids.append(other.track(other.campaign("test"), Visit(ip="198.51.100.3", user_agent="third")).subid)
    result = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert (result.inserted, result.rejected) == (3, 2)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
    assert (settings.spool_dir / REJECTED_FILE).read_bytes() == b"".join(bad)
    assert spool_status(db, settings.spool_dir).rejected_lines == 2
    assert "spool segment 1: 2 line(s) refused (journal line's created_at" in caplog.text


def test_garbage_longer_than_a_read_neither_hangs_a_worker_nor_stalls_the_flusher(make_tracker, db, settings):
    """A run of zeros with no newline, as a crash can leave in a file being appended to."""
    from models.admin.services import create_campaign
    from models.clicks.spool import READ_CHUNK

    create_campaign(db, "Test", "test", offer_url=OFFER)
    tracker = make_tracker()
    subids = [tracker.track(tracker.campaign("test"), Visit(ip="198.51.100.1", user_agent="first")).subid]
    with open(segment_path(settings.spool_dir, 1), "ab") as journal:
        journal.write(b"\0" * (READ_CHUNK * 5 // 2) + b"\n")

    def track() -> None:
        other = make_tracker()  # Replays the garbage at start, then reads it again under the lock.
        subids.append(other.track(other.campaign("test"), Visit(ip="198.51.100.2", user_agent="b")).subid)

    worker = threading.Thread(target=track, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the worker is stuck on the garbage"
    result = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert result.inserted == 2 and result.rejected >= 1
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)


def test_web_workers_keep_answering_and_starting_over_poisoned_spool_lines(lanner, start_server, settings):
    lanner("campaign", "create", "P", "--alias", "p", "--offer-url", OFFER)
    server = start_server(workers=2)
    status, headers, _ = click(server.port, "p", ua="before the poison")
    assert status == 302
    served = [subid_of(headers["location"])]
    path = segment_path(settings.spool_dir, list_segments(settings.spool_dir)[-1])
    with open(path, "ab") as journal:
        journal.writelines(poison(path.read_bytes().splitlines(keepends=True)[-1]))
    for n in range(10):
        status, headers, _ = click(server.port, "p", ip=f"198.51.100.{n + 1}", ua=f"after the poison {n}")
        assert status == 302, server.log
        served.append(subid_of(headers["location"]))
    # A reload starts a new generation of workers, each replaying the unflushed journal.
    before = set(web_workers(server.process.pid))
    os.kill(server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 30
    while True:
        now = set(web_workers(server.process.pid))
        if len(now) == 2 and not now & before:
            break
        assert time.monotonic() < deadline, server.log
        time.sleep(0.1)
    for n in range(10):
        status, headers, _ = click(server.port, "p", ip=f"198.51.101.{n + 1}", ua=f"after the reload {n}")
        assert status == 302, server.log
        served.append(subid_of(headers["location"]))
    assert "Traceback" not in server.log
    flushed = lanner("spool", "flush")
    assert "Inserted 21, already present 0, rejected 2." in flushed.stdout
    assert "refused (journal line's created_at 99999999999999999999 is out of range)" in flushed.stderr
    assert stored_subids() == set(served)
    assert len((settings.spool_dir / REJECTED_FILE).read_bytes().splitlines()) == 2
    assert json.loads(lanner("spool", "status", "--json").stdout)[0]["rejected_lines"] == 2
    assert json.loads(lanner("status", "--json").stdout)["spool"]["rejected_lines"] == 2


def test_the_clicks_of_a_deleted_active_segment_are_restored_and_all_land(lanner, start_server, settings):
    lanner("campaign", "create", "D", "--alias", "d", "--offer-url", OFFER)
    server = start_server(workers=2)

    def clicks(label: str, count: int) -> list[str]:
        subids = []
        for n in range(count):
            status, headers, _ = click(server.port, "d", ip=f"203.0.113.{n + 1}", ua=f"{label} {n}")
            assert status == 302, server.log
            subids.append(subid_of(headers["location"]))
        return subids

    landed = clicks("landed", 5)
    lanner("spool", "flush")
    unflushed = clicks("unflushed", 3)  # In the file only, which the web workers still have open.
    segment_path(settings.spool_dir, 1).unlink()
    after: list[str] = []

    def hammer(n: int) -> None:
        after.extend(clicks(f"after {n}", 15))

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(after) == 60
    flushed = lanner("spool", "flush")
    assert "Inserted 63, already present 0, rejected 0." in flushed.stdout
    stored = stored_subids()
    assert stored == {*landed, *unflushed, *after}, f"{len(stored)} of 68 stored\n{server.log}"
    assert (
        "spool segment 1 was deleted or moved away while in use: restored its 3 click(s) not yet in the "
        "database from this worker's open file" in server.log
    )
    assert list_segments(settings.spool_dir) == [1]  # Restored, and appended to as before.
    status = lanner("spool", "status", "--json", check=False)
    assert status.returncode == 0 and json.loads(status.stdout)[0]["missing_segments"] == []


def test_every_click_lands_when_the_active_segment_is_deleted_under_load(lanner, start_server, settings):
    lanner("campaign", "create", "L", "--alias", "l", "--offer-url", OFFER)
    server = start_server(workers=2)
    stop = threading.Event()
    results: list[tuple[float, int, str]] = []  # (when the request began, status, subid)

    def hammer(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            began = time.monotonic()
            status, headers, _ = click(server.port, "l", ip=f"100.64.{n}.{i % 250 + 1}", ua=f"load {n} {i}")
            results.append((began, status, subid_of(headers["location"]) if status == 302 else ""))

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(results) < 100:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    segment_path(settings.spool_dir, 1).unlink()
    deleted_at = time.monotonic()
    while len([r for r in results if r[0] > deleted_at]) < 200:
        assert time.monotonic() < deadline + 30
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join()
    assert all(status == 302 for _, status, _ in results), server.log
    lanner("spool", "flush")
    served = [subid for _, _, subid in results]
    stored = stored_subids()
    lost = set(served) - stored
    assert not lost, f"{len(lost)} of {len(served)} clicks are lost\n{server.log}"
    assert len(stored) == len(set(served)) == len(served)
    # Restored at its path; or, when a worker opened its journal only after the deletion (a busy box
    # can send it no click before), made anew there by it, and the old file's clicks moved on.
    assert (
        "spool segment 1 was deleted or moved away while in use: restored its" in server.log
        or "spool segment 1 was replaced while in use; its" in server.log
    ), server.log
    assert json.loads(lanner("status", "--json").stdout)["spool"]["missing_segments"] == []


def test_a_segment_moved_away_loses_no_later_click(make_tracker, db, settings, tmp_path):
    from models.admin.services import create_campaign

    create_campaign(db, "Test", "test", offer_url=OFFER)
    tracker = make_tracker()
    campaign = tracker.campaign("test")
    first = tracker.track(campaign, Visit(ip="198.51.100.1", user_agent="first")).subid
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    segment_path(settings.spool_dir, 1).rename(tmp_path / "moved.log")
    later = [
        tracker.track(campaign, Visit(ip="198.51.100.2", user_agent=f"later {n}")).subid for n in range(3)
    ]
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == {first, *later}
    # Everything in it had landed: nothing to report.
    assert spool_status(db, settings.spool_dir).missing_segments == []


def test_a_deleted_sealed_segment_is_reported_until_acknowledged(make_tracker, db, settings, env, caplog):
    from models.admin.services import create_campaign

    create_campaign(db, "Test", "test", offer_url=OFFER)
    tracker = make_tracker(segment_bytes=2000)
    campaign = tracker.campaign("test")
    subids = [
        tracker.track(campaign, Visit(ip="198.51.100.1", user_agent=f"UA {n}")).subid for n in range(40)
    ]
    assert len(list_segments(settings.spool_dir)) >= 4
    deleted = segment_path(settings.spool_dir, 2)
    lost = {subid for subid in subids if subid.encode() in deleted.read_bytes()}
    deleted.unlink()

    def spool_status_command() -> tuple[int, dict, str]:
        result = run_lanner(env, "spool", "status", "--json", check=False)
        return result.returncode, json.loads(result.stdout)[0], result.stderr

    code, status, stderr = spool_status_command()  # Before the flusher got to it.
    assert code == 1 and status["missing_segments"] == [2] and "Spool segment(s) 2 were deleted" in stderr
    result = flush_spool(db, settings.spool_dir, 2000)
    assert result.inserted == len(subids) - len(lost)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids) - lost
    assert "spool segment 2 is missing when the flusher got to it" in caplog.text
    code, status, stderr = spool_status_command()  # After: noted in missing.log.
    assert code == 1 and status["missing_segments"] == [2]
    shown = json.loads(run_lanner(env, "status", "--json").stdout)["spool"]
    assert shown["missing_segments"] == [2]
    (settings.spool_dir / MISSING_FILE).unlink()  # Acknowledged.
    assert spool_status_command()[:2] == (0, {**status, "missing_segments": []})


def test_a_segment_replaced_while_in_use_loses_no_later_click_nor_stalls_the_flusher(
    make_tracker, db, settings, tmp_path
):
    import shutil

    from models.admin.services import create_campaign

    create_campaign(db, "Test", "test", offer_url=OFFER)
    tracker = make_tracker()
    campaign = tracker.campaign("test")
    subids = [tracker.track(campaign, Visit(ip="198.51.100.1", user_agent="first")).subid]
    path = segment_path(settings.spool_dir, 1)
    shutil.copy(path, tmp_path / "copy.log")
    os.replace(tmp_path / "copy.log", path)  # Same lines, another file: the old one is unlinked.
    subids += [
        tracker.track(campaign, Visit(ip="198.51.100.2", user_agent=f"later {n}")).subid for n in range(3)
    ]
    # It holds our lines up to our offset (a copy, a restore): the same segment, appended to in place.
    assert list_segments(settings.spool_dir) == [1] and tracker.journal.segment == 1
    restarted = make_tracker()  # Starts at the flushed position, in segment 1.
    subids.append(
        restarted.track(restarted.campaign("test"), Visit(ip="198.51.100.3", user_agent="new")).subid
    )
    assert restarted.journal.segment == 1 and path.read_bytes().count(b"\n") == 5
    result = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert (result.inserted, result.duplicates) == (5, 0)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
    assert spool_status(db, settings.spool_dir).missing_segments == []


def test_a_worker_started_after_the_active_segment_was_deleted_loses_no_older_workers_click(
    make_tracker, db, settings, caplog
):
    """A worker that starts (or opens its journal) after the active segment was deleted by hand, with
    nothing landed from it yet, creates the segment anew at its path. The workers that still hold the
    old file find the path replaced: their unlanded lines go to the next segment, and the new file is
    left so the worker that created it follows them there."""
    from models.admin.services import create_campaign

    create_campaign(db, "Test", "test", offer_url=OFFER)
    old = make_tracker()
    campaign = old.campaign("test")
    subids = [
        old.track(campaign, Visit(ip=f"198.51.100.{n + 1}", user_agent=f"old {n}")).subid for n in range(5)
    ]
    segment_path(settings.spool_dir, 1).unlink()  # Nothing of it landed: the flushed position is (1, 0).
    late = make_tracker()
    subids.append(late.track(late.campaign("test"), Visit(ip="203.0.113.1", user_agent="late")).subid)
    assert late.journal.segment == 1 and segment_path(settings.spool_dir, 1).exists()  # Made anew.
    subids += [
        old.track(campaign, Visit(ip=f"198.51.100.{n + 10}", user_agent=f"old after {n}")).subid
        for n in range(3)
    ]
    subids.append(late.track(late.campaign("test"), Visit(ip="203.0.113.2", user_agent="late 2")).subid)
    assert old.journal.segment == late.journal.segment == 2
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert {row[0] for row in db.execute_sql("SELECT subid FROM click").fetchall()} == set(subids)
    assert "its 5 unlanded click(s) moved to segment 2" in caplog.text


def test_a_real_flusher_lands_the_lines_around_poisoned_ones_and_keeps_going(
    lanner, start_consumer, settings
):
    lanner("campaign", "create", "P", "--alias", "p", "--offer-url", OFFER)
    good = [journal_line() for _ in range(3)]
    bad = poison(good[0])
    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    segment_path(settings.spool_dir, 1).write_bytes(good[0] + bad[0] + good[1] + bad[1] + good[2])
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    expected = {decode_line(line)[0] for line in good}
    rejected = settings.spool_dir / REJECTED_FILE
    deadline = time.monotonic() + 30
    while stored_subids() != expected or not rejected.exists() or rejected.read_bytes() != b"".join(bad):
        assert consumer.process.poll() is None and time.monotonic() < deadline, consumer.log
        time.sleep(0.2)
    late = journal_line()  # The flusher goes on landing what comes next.
    with open(segment_path(settings.spool_dir, 1), "ab") as journal:
        journal.write(late)
    while decode_line(late)[0] not in stored_subids():
        assert consumer.process.poll() is None and time.monotonic() < deadline, consumer.log
        time.sleep(0.2)
    assert "spool segment 1: 2 line(s) refused (journal line's created_at" in consumer.log
