"""Spool segments cut short by hand or torn mid-line (issue 32): the next click's line is never glued to
a torn one, every click made after the damage lands exactly once, and the damage is reported.

Real files, a real migrated database; in-process web workers (`make_tracker`) where the journal is the
subject, a real `lanner serve` and the CLI where the redirect and `lanner spool status` are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import click, subid_of
from test_spool_faults import OFFER, stored_subids

from models.admin.services import create_campaign
from models.clicks.spool import (
    DAMAGED_FILE,
    REJECTED_FILE,
    HeldSegments,
    flush_spool,
    list_segments,
    read_damaged_segments,
    segment_path,
    spool_status,
)
from models.clicks.visit import Visit


def track(tracker, ip: str) -> str:
    tracker.refresh()  # As a web worker does about once a second: the flushed position, among others.
    return tracker.track(tracker.campaign("cut"), Visit(ip=ip, user_agent="Mozilla/5.0 damage")).subid


def assert_stored_once(db, subids: list[str]) -> None:
    """Each subid in the click table once, nothing else, and the offer's counter counts each once."""
    assert stored_subids() == set(subids) and len(subids) == len(set(subids))
    assert db.execute_sql("SELECT COUNT(*) FROM click").fetchone()[0] == len(subids)
    counted = db.execute_sql("SELECT SUM(clicks) FROM click_counter WHERE scope = 'offer'").fetchone()[0]
    assert counted == len(subids)


def is_read_only(path: Path) -> bool:
    return not path.stat().st_mode & 0o222


def cut_mid_line(path: Path) -> tuple[int, bytes]:
    """Cut the file 10 bytes into its last line: (where that line starts, what is left of it)."""
    data = path.read_bytes()
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    os.truncate(path, start + 10)
    return start, data[start : start + 10]


@pytest.mark.parametrize("is_landed", [True, False], ids=["landed", "unlanded"])
def test_the_active_segment_cut_mid_line_never_swallows_the_next_click(
    make_tracker, db, settings, caplog, is_landed
):
    """The issue's case: the click after the cut was appended to the torn line, refused with it (logged as
    a rejected line only) and lost, while `lanner spool status` saw nothing wrong."""
    create_campaign(db, "Cut", "cut", offer_url=OFFER)
    idle = make_tracker()  # Has read segment 1 up to its start only: it meets the torn line itself.
    busy = make_tracker()  # Has read all of it: the file is now shorter than its offset.
    before = [track(busy, f"192.0.2.{n}") for n in range(5)]
    if is_landed:
        flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    path = segment_path(settings.spool_dir, 1)
    torn_at, torn = cut_mid_line(path)
    after = [track(idle, "198.51.100.1"), track(busy, "198.51.100.2"), track(make_tracker(), "198.51.100.3")]
    # Every writer left the damaged segment for the same new one: none appends after the torn line.
    assert (idle.journal.segment, busy.journal.segment) == (2, 2) and is_read_only(path)
    result = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert result.duplicates == 0
    if is_landed:  # The cut part had landed: nothing lost, nothing refused.
        assert_stored_once(db, before + after)
        assert (result.inserted, result.rejected) == (3, 0)
        assert not (settings.spool_dir / REJECTED_FILE).exists()
    else:  # The cut click is lost (its line's end is gone); what is left of it is refused.
        assert_stored_once(db, before[:-1] + after)
        assert (result.inserted, result.rejected) == (7, 1)
        assert (settings.spool_dir / REJECTED_FILE).read_bytes() == torn + b"\n"
    [noted] = read_damaged_segments(settings.spool_dir)
    assert (noted.segment, noted.at, noted.what) == (1, torn_at, f"ends in a torn line at byte {torn_at}")
    assert f"spool segment 1 ends in a torn line at byte {torn_at}" in caplog.text
    assert spool_status(db, settings.spool_dir).damaged_segments == [1]


@pytest.mark.parametrize("is_mid_line", [True, False], ids=["mid-line", "line-boundary"])
def test_a_worker_idle_in_a_closed_segment_cut_short_follows_the_others(
    make_tracker, db, settings, is_mid_line
):
    """A segment cut below segment_bytes no longer looks sealed to a worker that read it only up to the
    cut: it would append there, behind the flusher. It was marked read-only as it was left, and that is
    what the worker sees."""
    create_campaign(db, "Cut", "cut", offer_url=OFFER)
    idle = make_tracker(segment_bytes=2000)
    busy = make_tracker(segment_bytes=2000)
    before = [track(busy, f"192.0.2.{n}") for n in range(24)]
    assert busy.journal.segment >= 3 and idle.journal.segment == 1
    closed = segment_path(settings.spool_dir, 1)
    assert is_read_only(closed) and not is_read_only(segment_path(settings.spool_dir, busy.journal.segment))
    flush_spool(db, settings.spool_dir, 2000)  # All landed; segment 1 not removed yet (no checkpoint).
    data = closed.read_bytes()
    if is_mid_line:
        cut_mid_line(closed)
    else:
        os.truncate(closed, data.rfind(b"\n", 0, len(data) - 1) + 1)  # Its last line gone, no torn line.
    assert closed.stat().st_size < 2000
    after = [track(idle, "198.51.100.1"), track(busy, "198.51.100.2")]
    assert idle.journal.segment == busy.journal.segment
    result = flush_spool(db, settings.spool_dir, 2000)
    assert (result.inserted, result.duplicates, result.rejected) == (2, 0, 0)
    assert_stored_once(db, before + after)
    # The torn line is found by the worker reading it; a cut at a line boundary of a landed segment lost
    # nothing and leaves no trace (one before it landed is the flusher's to see: the next test).
    assert [noted.segment for noted in read_damaged_segments(settings.spool_dir)] == (
        [1] if is_mid_line else []
    )


def test_the_flusher_reports_a_closed_segment_cut_short_at_a_line_boundary_before_it_landed(
    make_tracker, db, settings, caplog
):
    create_campaign(db, "Cut", "cut", offer_url=OFFER)
    busy = make_tracker(segment_bytes=2000)
    before = [track(busy, f"192.0.2.{n}") for n in range(24)]
    held = HeldSegments()  # The flusher's, kept across rounds as `lanner worker` keeps it.
    try:
        held.hold(
            settings.spool_dir, 1, list_segments(settings.spool_dir)
        )  # A round that landed nothing yet.
        closed = segment_path(settings.spool_dir, 1)
        data = closed.read_bytes()
        keep = data.rfind(b"\n", 0, data.rfind(b"\n", 0, len(data) - 1)) + 1  # Its last two lines gone.
        os.truncate(closed, keep)
        lost = [subid for subid in before if subid.encode() in data[keep:]]
        assert len(lost) == 2
        result = flush_spool(db, settings.spool_dir, 2000, held=held)
    finally:
        held.close()
    assert (result.duplicates, result.rejected) == (0, 0)
    assert_stored_once(db, [subid for subid in before if subid not in lost])
    [noted] = read_damaged_segments(settings.spool_dir)
    assert (noted.segment, noted.at, noted.what) == (1, keep, f"was cut from {len(data)} to {keep} bytes")
    assert f"spool segment 1 was cut from {len(data)} to {keep} bytes" in caplog.text
    assert spool_status(db, settings.spool_dir).damaged_segments == [1]


@pytest.mark.parametrize("is_landed", [True, False], ids=["landed", "unlanded"])
def test_a_worker_starting_on_a_segment_cut_short_reports_it_and_appends_to_a_new_one(
    make_tracker, db, settings, caplog, is_landed
):
    create_campaign(db, "Cut", "cut", offer_url=OFFER)
    first = make_tracker()
    before = [track(first, f"192.0.2.{n}") for n in range(5)]
    if is_landed:
        flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    landed = (segment_path(settings.spool_dir, 1)).stat().st_size if is_landed else 0
    first.close()  # A restart: no worker runs while the segment is cut.
    path = segment_path(settings.spool_dir, 1)
    torn_at, _ = cut_mid_line(path)
    size = path.stat().st_size
    restarted = make_tracker()
    assert restarted.journal.segment == 2 and is_read_only(path)
    [noted] = read_damaged_segments(settings.spool_dir)
    if is_landed:  # Starting at the flushed position, past the end of the file.
        assert (noted.at, noted.what) == (size, f"was cut to {size} bytes, below the {landed} read in it")
    else:  # Replaying the segment from its start, up to the torn line.
        assert (noted.at, noted.what) == (torn_at, f"ends in a torn line at byte {torn_at}")
    assert (
        f"spool segment 1 {noted.what}" in caplog.text
        and str(settings.spool_dir / DAMAGED_FILE) in caplog.text
    )
    after = track(restarted, "198.51.100.1")
    flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert_stored_once(db, (before if is_landed else before[:-1]) + [after])


def test_spool_status_exits_1_naming_a_segment_cut_short_while_the_server_loses_no_click(
    lanner, start_server, settings
):
    lanner("campaign", "create", "Cut", "--alias", "cut", "--offer-url", OFFER)
    server = start_server(workers=2)

    def clicks(label: str, count: int) -> list[str]:
        subids = []
        for n in range(count):
            status, headers, _ = click(server.port, "cut", ip=f"203.0.113.{n + 1}", ua=f"{label} {n}")
            assert status == 302, server.log
            subids.append(subid_of(headers["location"]))
        return subids

    before = clicks("landed", 6)
    lanner("spool", "flush")
    unflushed = clicks("unflushed", 3)
    path = segment_path(settings.spool_dir, 1)
    cut_mid_line(path)  # Through the last unflushed click's line.
    after = clicks("after", 10)
    status = lanner("spool", "status", "--json", check=False)
    assert status.returncode == 1 and json.loads(status.stdout)[0]["damaged_segments"] == [1]
    assert f"Spool segment file(s) {path} are damaged (cut short, or ending in a torn line)" in status.stderr
    assert f"details in {settings.spool_dir / DAMAGED_FILE}; remove it to acknowledge" in status.stderr
    assert json.loads(lanner("status", "--json").stdout)["spool"]["damaged_segments"] == [1]
    flushed = lanner("spool", "flush")
    assert "Inserted 12, already present 0, rejected 1." in flushed.stdout
    assert stored_subids() == {*before, *unflushed[:-1], *after}
    assert "spool segment 1 " in server.log and f"noted in {settings.spool_dir / DAMAGED_FILE}" in server.log
    assert lanner("spool", "status", check=False).returncode == 1  # Landed since, but not acknowledged.
    (settings.spool_dir / DAMAGED_FILE).unlink()
    assert lanner("spool", "status", check=False).returncode == 0
