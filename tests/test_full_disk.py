"""A full disk under a real `lanner serve` and a real `lanner worker`.

The data directory lives on a small file system mounted for the test: a tmpfs, and an ext4 image
on a loop device (root only: a test is skipped, saying so, where mounting is refused). A ballast
file fills it; visitors then get the configured answer (never a 500, never a subid that is not in
the spool); once the ballast is gone, clicks land again by themselves and every subid given out
lands exactly once.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import click, request, subid_of, wait_until

from workers.bench.faults import fill_file_system

SMALL_FS_BYTES = 16 * 1024 * 1024
OFFER = "https://offer.example/lp?click={subid}"
FALLBACK = "https://fallback.example/sorry"
WEB_WORKERS = 2
REFUSED_MESSAGE = "cannot be written"  # The web workers' throttled error line (models/clicks/tracker.py).
FLUSHER_MESSAGE = "; trying again"  # The flusher's throttled error line (workers/runtime/tasks.py).


def _mount_command(kind: str, tmp_path: Path, mount_point: Path) -> list[str]:
    if kind == "tmpfs":
        return ["mount", "-t", "tmpfs", "-o", f"size={SMALL_FS_BYTES}", "tmpfs", str(mount_point)]
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    image = tmp_path / "small-fs.ext4"
    with open(image, "wb") as file:
        file.truncate(SMALL_FS_BYTES)
    # No blocks reserved for root: the tracker runs as root here, and so does the ballast.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", str(image)], check=True)
    return ["mount", "-o", "loop", str(image), str(mount_point)]


@pytest.fixture(params=["tmpfs", "ext4"])
def data_dir(request, tmp_path: Path):
    """The test's data directory on its own 16 MB file system (overrides conftest's)."""
    mount_point = tmp_path / "small-fs"
    mount_point.mkdir()
    mounted = subprocess.run(
        _mount_command(request.param, tmp_path, mount_point), capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small {request.param} here (it needs root): {mounted.stderr.strip()}")
    path = mount_point / "var"
    path.mkdir()
    yield path
    subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


class Ballast:
    """A file that takes every free byte of its file system."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self) -> None:
        """Top up: the tracker frees space too (a TRUNCATE checkpoint, a landed segment)."""
        fill_file_system(self.path)

    def remove(self) -> None:
        self.path.unlink()


def stored_subids() -> list[str]:
    """The subids in the database, read on this test's own connection (either backend)."""
    from models.store.database import db

    return [subid for (subid,) in db.connection().execute("SELECT subid FROM click").fetchall()]


def spooled(settings) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(settings.spool_dir.glob("clicks.*.log")))


def status_json(lanner) -> dict:
    return json.loads(lanner("status", "--json").stdout)


def lanner_tracebacks(log: str) -> list[str]:
    """The log line before each traceback that is not Huey's own.

    (Huey logs a traceback when it cannot queue a periodic task on a full disk; the flusher does
    not depend on it.)
    """
    lines = log.splitlines()
    return [
        lines[n - 1] if n else ""
        for n, line in enumerate(lines)
        if line.startswith("Traceback") and not (n and " huey." in lines[n - 1])
    ]


@pytest.fixture
def campaign(lanner):
    lanner("campaign", "create", "Full", "--alias", "full", "--offer-url", OFFER)
    return "full"


@pytest.mark.long
def test_a_full_disk_answers_503_then_landing_resumes_by_itself(
    campaign, lanner, start_server, start_consumer, settings, data_dir
):
    server = start_server(workers=WEB_WORKERS)
    consumer = start_consumer(LANNER_FLUSH_INTERVAL="0.1")
    given: list[str] = []  # Every subid a visitor got.
    serial = iter(range(1_000_000))

    def visit() -> tuple[int, dict, bytes]:
        status, headers, body = click(server.port, campaign, ua=f"Full disk UA {next(serial)}")
        assert status in (302, 503), (status, body, server.log)
        if status == 302:
            given.append(subid_of(headers["location"]))
        return status, headers, body

    for _ in range(10):
        assert visit()[0] == 302
    wait_until(lambda: set(stored_subids()) == set(given), 30, "clicks landed", lambda: consumer.log)

    ballast = Ballast(data_dir.parent / "ballast")
    full_since = time.monotonic()
    refused = 0
    deadline = full_since + 30
    while refused < 200 or time.monotonic() < full_since + 3:  # Long enough to see the log throttled.
        assert time.monotonic() < deadline, f"only {refused} clicks refused\n{server.log}"
        ballast.fill()
        for _ in range(50):
            status, headers, body = visit()
            if status == 503:
                refused += 1
                assert int(headers["retry-after"]) > 0 and headers["cache-control"] == "no-store"
                assert "location" not in headers and b"Traceback" not in body
            else:
                # Given out while full: its line made it to the spool before the answer left.
                assert given[-1].encode() in spooled(settings), given[-1]
    time.sleep(1.5)  # The flusher tries (and fails) to land the clicks that fit while full.
    during = status_json(lanner)  # `lanner status` works on a full disk and counts the refusals.
    assert during["spool"]["refused_clicks"] == refused, during

    ballast.remove()
    emptied_at = time.monotonic()
    wait_until(lambda: visit()[0] == 302, 30, "a click was answered with a subid again", lambda: server.log)
    for _ in range(20):
        assert visit()[0] == 302
    # Landing resumes by itself: the same consumer process, no restart.
    wait_until(lambda: set(stored_subids()) == set(given), 30, "every subid landed", lambda: consumer.log)
    landed_at = time.monotonic()
    assert consumer.process.poll() is None and server.process.poll() is None
    assert sorted(stored_subids()) == sorted(set(given)) and len(given) == len(set(given))
    assert not (settings.spool_dir / "rejected.log").exists()  # No half-written line was kept.

    assert status_json(lanner)["spool"]["refused_clicks"] == refused
    assert "Traceback" not in server.log, server.log
    # The error is logged at most once a second per worker, not once per click.
    refused_lines = server.log.count(REFUSED_MESSAGE)
    assert 1 <= refused_lines <= WEB_WORKERS * (math.ceil(emptied_at - full_since) + 1), server.log
    flusher_lines = consumer.log.count(FLUSHER_MESSAGE)
    assert flusher_lines <= math.ceil(landed_at - full_since) + 1, consumer.log
    assert lanner_tracebacks(consumer.log) == [], consumer.log


def test_a_full_disk_can_send_visitors_to_the_fallback_url_without_a_subid(
    campaign, start_server, settings, data_dir
):
    server = start_server(workers=1, LANNER_SPOOL_FULL_ANSWER="fallback", LANNER_FALLBACK_URL=FALLBACK)
    assert click(server.port, campaign, ua="before")[0] == 302
    ballast = Ballast(data_dir.parent / "ballast")
    serial = iter(range(1_000_000))

    def fallback_answer() -> bool:
        ballast.fill()
        status, headers, _ = click(server.port, campaign, ua=f"fallback {next(serial)}")
        assert status == 302, server.log
        return headers["location"] == FALLBACK

    wait_until(fallback_answer, 30, "the fallback answer", lambda: server.log)

    def refused_pixel() -> tuple | None:
        """A pixel's line may still fit in the spool's last block, which the ballast cannot take (a
        shorter line than the click refused above): that one is stored and answered 200."""
        ballast.fill()
        answer = request(server.port, "/px/click/full", {"X-Real-IP": "203.0.113.8"})
        return answer if answer[0] != 200 else None

    status, headers, body = wait_until(refused_pixel, 30, "a pixel refused", lambda: server.log)
    assert status == 503 and int(headers["retry-after"]) > 0 and "set-cookie" not in headers
    assert body.startswith(b"GIF") and "x-lanner-subid" not in headers
    ballast.remove()
    status, headers, _ = click(server.port, campaign, ua="after")
    assert status == 302 and headers["location"].startswith("https://offer.example/lp?click=")
    assert subid_of(headers["location"]).encode() in spooled(settings)
    assert "Traceback" not in server.log, server.log


def test_spool_full_answer_is_503_or_fallback_with_a_fallback_url():
    from settings import load_settings

    assert load_settings({}).spool_full_answer == "503"
    with pytest.raises(ValueError, match="LANNER_SPOOL_FULL_ANSWER='302' is invalid"):
        load_settings({"LANNER_SPOOL_FULL_ANSWER": "302"})
    with pytest.raises(ValueError, match="needs LANNER_FALLBACK_URL"):
        load_settings({"LANNER_SPOOL_FULL_ANSWER": "fallback"})
    chosen = load_settings({"LANNER_SPOOL_FULL_ANSWER": "fallback", "LANNER_FALLBACK_URL": FALLBACK})
    assert chosen.spool_full_answer == "fallback"


PAGE = 4096  # tmpfs hands out whole pages: a line crossing into a new one is written in part.


def test_a_click_that_finds_the_disk_full_leaves_no_half_line_and_is_counted(
    make_tracker, db, settings, data_dir
):
    from models.admin.services import create_campaign
    from models.clicks.record import decode_line
    from models.clicks.refusals import SpoolUnwritable, read_refused
    from models.clicks.spool import flush_spool, segment_path
    from models.clicks.visit import Visit

    create_campaign(db, "Full", "full", offer_url=OFFER)
    tracker = make_tracker()
    campaign = tracker.campaign("full")
    subids = [tracker.track(campaign, Visit(ip="198.51.100.1", user_agent="before")).subid]
    segment = segment_path(settings.spool_dir, tracker.journal.segment)
    ballast = Ballast(data_dir.parent / "ballast")
    ballast.fill()
    for n in range(PAGE):  # Lines still fit in the segment's last page; then one does not.
        size_before = segment.stat().st_size
        try:
            subids.append(tracker.track(campaign, Visit(ip="198.51.100.2", user_agent=f"ua {n}")).subid)
        except SpoolUnwritable:
            break
    else:
        pytest.fail("the disk never filled up")
    assert size_before % PAGE != 0  # The refused line was written in part by the kernel...
    assert segment.stat().st_size == size_before  # ...and cut off again: no half line.
    # Cutting it off may have freed the block the kernel gave its tail (then the next, shorter line
    # would rightly fit; seen once on ext4): the disk is made full again before the clicks it refuses.
    ballast.fill()
    for n in range(3):
        with pytest.raises(SpoolUnwritable):
            tracker.track(campaign, Visit(ip="198.51.100.3", user_agent=f"refused {n}"))
    assert read_refused(settings.spool_dir)[0] == 4  # In the file, though the disk is full.

    ballast.remove()
    subids.append(tracker.track(campaign, Visit(ip="198.51.100.4", user_agent="after")).subid)
    other = make_tracker()  # Another worker replays the journal: every line is whole.
    assert len(other.index) == len(subids)
    lines = segment.read_bytes().splitlines(keepends=True)
    assert [decode_line(line)[0] for line in lines] == subids
    result = flush_spool(db, settings.spool_dir, settings.spool_segment_bytes)
    assert (result.inserted, result.rejected) == (len(subids), 0)


@pytest.mark.sqlite_only  # The SQLite file on the full disk; PostgreSQL's files are on the server's.
def test_the_flusher_fsyncs_the_spool_while_the_database_cannot_be_written(
    make_tracker, db, settings, data_dir
):
    from models.admin.services import create_campaign
    from models.clicks.visit import Visit
    from models.store.database import StoreBusy
    from workers.runtime.tasks import SpoolFlusher

    create_campaign(db, "Full", "full", offer_url=OFFER)
    tracker = make_tracker()
    tracker.track(tracker.campaign("full"), Visit(ip="198.51.100.1", user_agent="spooled"))
    db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # Any write now needs new space.
    flusher = SpoolFlusher(settings)
    flusher.last_sync = float("-inf")
    Ballast(data_dir.parent / "ballast").fill()
    with pytest.raises(StoreBusy) as failure:
        flusher.run_once()
    # The cause, not peewee's "cannot rollback" after SQLite rolled back by itself.
    assert "database or disk is full" in str(failure.value.cause)
    assert flusher.last_sync > float("-inf")  # The spool was fsynced before the flush failed.


def test_the_flusher_lock_is_single_and_dies_with_its_process(tmp_path, env):
    import signal
    import sys

    from workers.runtime.tasks import FileLock

    path = tmp_path / "flusher.lock"
    first, second = FileLock(path), FileLock(path)
    assert first.acquire() and not second.acquire()  # Also between threads of one process.
    first.release()
    assert second.acquire()
    second.release()
    script = (
        "import pathlib, sys, time\n"
        "from workers.runtime.tasks import FileLock\n"
        "assert FileLock(pathlib.Path(sys.argv[1])).acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert not first.acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert first.acquire()  # The kernel dropped the dead holder's lock: no stale lock to clear.
    first.release()


def test_an_lp_click_on_a_full_disk_is_refused_like_a_click_then_lands_once(
    db, lanner, start_server, settings, data_dir
):
    from landers import lander_campaign

    lander_campaign(db, "fulllp", [{"url": "https://lp.example/?click={subid}"}], offers=[{"url": OFFER}])
    server = start_server(workers=1)
    # The segment's last 4,096-byte block may still hold as many short LP lines as fit in what the clicks
    # left of it: enough subids that more LP lines than a block holds can be tried (each line is over
    # 26 bytes), and go on until one is refused.
    subids = [subid_of(click(server.port, "fulllp", ua=f"lp {n}")[1]["location"]) for n in range(160)]
    ballast = Ballast(data_dir.parent / "ballast")
    refused = None
    for subid in subids:
        ballast.fill()
        status, headers, body = request(server.port, f"/lp/click?subid={subid}")
        assert status in (302, 503), (status, body, server.log)
        if status == 503:
            assert int(headers["retry-after"]) > 0 and "location" not in headers
            refused = subid
            break
    assert refused is not None, server.log
    assert f"lp\t{refused}\t".encode() not in spooled(settings)  # Nothing half-written, nothing recorded.
    ballast.remove()
    status, headers, _ = request(server.port, f"/lp/click?subid={refused}")
    assert status == 302 and headers["location"] == f"https://offer.example/lp?click={refused}"
    assert spooled(settings).count(f"lp\t{refused}\t".encode()) == 1
    lanner("spool", "flush")
    from models.store.database import db as database

    rows = (
        database.connection()
        .execute("SELECT COUNT(*) FROM click WHERE subid = ? AND lp_clicked_at IS NOT NULL", (refused,))
        .fetchall()
    )
    assert [tuple(row) for row in rows] == [(1,)]
    assert "Traceback" not in server.log, server.log
