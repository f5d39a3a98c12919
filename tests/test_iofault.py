"""The I/O fault shim (workers/bench/iofault.c) under a real process, and what the spool's fsync does
after a failed one: written again before the next fsync (fsyncgate), and the flush goes on.

The shim is built with gcc into the test's tmp dir; each process that carries it is a fresh Python
started with LD_PRELOAD (a library cannot be preloaded into a process already running)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workers.bench.errors import BenchError
from workers.bench.iofault import IoEvent, IoFaults, build_shim, fsyncs_retried_as_success

ROOT = Path(__file__).resolve().parent.parent
OFFER = "https://offer.example/lp?click={subid}"


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    try:
        return build_shim(tmp_path_factory.mktemp("iofault"))
    except BenchError as exc:
        pytest.skip(str(exc))


def run_under(faults: IoFaults, script: str, *args: str) -> dict:
    """Run `script` in a fresh Python carrying the shim; the JSON it prints last."""
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=faults.preload_env({"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.splitlines()[-1])


CALLS = """
import json, os, sys
spool, other, control = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}
def attempt(name, call):
    try:
        call()
        out[name] = "ok"
    except OSError as exc:
        out[name] = exc.strerror
fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
free = os.open(other, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
attempt("off write", lambda: os.write(fd, b"a\\n"))
os.rename(control + ".on", control)  # Switched on while the process runs, as the bench does.
attempt("on write", lambda: os.write(fd, b"b\\n"))
attempt("on pwrite", lambda: os.pwrite(fd, b"c", 0))
attempt("on fsync", lambda: os.fsync(fd))
attempt("on fdatasync", lambda: os.fdatasync(fd))
attempt("other file write", lambda: os.write(free, b"x\\n"))
attempt("other file fsync", lambda: os.fsync(free))
os.unlink(control)
attempt("off again write", lambda: os.write(fd, b"d\\n"))
attempt("off again fsync", lambda: os.fsync(fd))
out["content"] = open(spool).read()
print(json.dumps(out))
"""


def test_the_shim_fails_only_matching_files_and_only_while_switched_on(shim, tmp_path):
    faults = IoFaults(shim, tmp_path, ["*/spool/clicks.*.log"])
    (tmp_path / "spool").mkdir()
    faults.inject(write="EIO", fsync="ENOSPC")
    faults.control.rename(faults.control.with_name("iofault.control.on"))
    out = run_under(
        faults,
        CALLS,
        str(tmp_path / "spool" / "clicks.00000001.log"),
        str(tmp_path / "spool" / "rejected.log"),
        str(faults.control),
    )
    assert out == {
        "off write": "ok",
        "on write": "Input/output error",
        "on pwrite": "Input/output error",
        "on fsync": "No space left on device",
        "on fdatasync": "No space left on device",
        "other file write": "ok",
        "other file fsync": "ok",
        "off again write": "ok",
        "off again fsync": "ok",
        "content": "a\nd\n",  # Nothing of a failed write reached the file.
    }
    assert faults.injected() == {"write": 1, "pwrite64": 1, "fsync": 1, "fdatasync": 1}


def test_a_dropped_write_answers_success_and_writes_nothing(shim, tmp_path):
    faults = IoFaults(shim, tmp_path, ["*/lost.log"])
    faults.inject(write="drop")
    out = run_under(
        faults,
        "import json, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "print(json.dumps({'written': os.write(fd, b'gone\\n'), 'size': os.fstat(fd).st_size}))\n",
        str(tmp_path / "lost.log"),
    )
    assert out == {"written": 5, "size": 0}


SYNC = """
import json, os, sys
from pathlib import Path
from models.clicks.spool import SpoolSync, segment_path
spool, control = Path(sys.argv[1]), Path(sys.argv[2])
segment = segment_path(spool, 1)
naive = spool / "naive.log"
out = {}
syncer = SpoolSync()
with open(segment, "ab") as journal, open(naive, "ab") as other:
    for line in (b"one\\n", b"two\\n"):
        journal.write(line); journal.flush(); other.write(line); other.flush()
        syncer.sync_from(1, spool)
        os.fsync(other.fileno())
    os.rename(str(control) + ".on", control)  # fsync fails from now on.
    journal.write(b"three\\n"); journal.flush(); other.write(b"three\\n"); other.flush()
    try:
        syncer.sync_from(1, spool)
        out["failed"] = False
    except OSError:
        out["failed"] = True
    try:
        os.fsync(other.fileno())
    except OSError:
        pass
    os.rename(str(control) + ".off", control)  # And work again (still recording).
    journal.write(b"four\\n"); journal.flush(); other.write(b"four\\n"); other.flush()
    syncer.sync_from(1, spool)
    os.fsync(other.fileno())  # The naive retry: success, the failed bytes never written again.
    syncer.sync_from(1, spool)
syncer.close()
out["content"] = segment.read_text()
print(json.dumps(out))
"""


def test_the_spool_writes_again_what_a_failed_fsync_left_before_it_counts_a_later_one(shim, tmp_path):
    faults = IoFaults(shim, tmp_path, ["*/spool/*.log"])
    (tmp_path / "spool").mkdir()
    faults.inject(fsync="EIO")
    faults.control.rename(faults.control.with_name("iofault.control.on"))
    faults.trace()  # Recording from the start: the fsyncs that succeed are noted too.
    faults.control.with_name("iofault.control.off").write_bytes(faults.control.read_bytes())
    out = run_under(faults, SYNC, str(tmp_path / "spool"), str(faults.control))
    assert out == {"failed": True, "content": "one\ntwo\nthree\nfour\n"}
    events = faults.events()
    segment = [e for e in events if e.path.endswith("clicks.00000001.log")]
    # After the failure at 14 bytes (durable up to 8), bytes 8-19 (to the end) were written again.
    assert [e.call for e in segment] == ["synced", "synced", "fsync", "pwrote", "synced", "synced"]
    assert (segment[3].a, segment[3].b) == (8, 11)
    assert fsyncs_retried_as_success(segment) == []
    naive = [e for e in events if e.path.endswith("naive.log")]
    assert fsyncs_retried_as_success(naive) == [
        f"{naive[0].path}: an fsync succeeded after one failed, bytes 8-14 not written again"
    ]


def test_the_fsyncgate_check_wants_every_failed_byte_written_again_after_the_last_failure():
    def event(call: str, a: int = -1, b: int = -1) -> IoEvent:
        return IoEvent(1, call, 5 if call == "fsync" else 0, "/s/clicks.1.log", a, b)

    healed = [event("synced", 100), event("fsync", 150), event("pwrote", 100, 50), event("synced", 160)]
    assert fsyncs_retried_as_success(healed) == []
    partly = [event("synced", 100), event("fsync", 150), event("pwrote", 110, 40), event("synced", 150)]
    assert fsyncs_retried_as_success(partly) != []
    # Written again, then failed again: the first rewrite no longer counts.
    twice = [event("fsync", 50), event("pwrote", 0, 50), event("fsync", 60), event("synced", 60)]
    assert fsyncs_retried_as_success(twice) == [
        "/s/clicks.1.log: an fsync succeeded after one failed, bytes 0-60 not written again"
    ]


class FailingSync:
    """A SpoolSync whose every fsync fails (what the shim does to `lanner worker`, in process)."""

    def __init__(self) -> None:
        self.calls = 0

    def sync(self, db, spool_dir) -> None:
        self.calls += 1
        raise OSError(5, "Input/output error")

    def close(self) -> None:
        pass


def test_a_failing_spool_fsync_does_not_keep_the_flusher_from_landing_clicks(make_tracker, db, settings):
    from models.admin.services import create_campaign
    from models.clicks.visit import Visit
    from workers.runtime.tasks import SpoolFlusher

    create_campaign(db, "Synced", "synced", offer_url=OFFER)
    tracker = make_tracker()
    subids = [
        tracker.track(tracker.campaign("synced"), Visit(ip="198.51.100.1", user_agent=f"ua {n}")).subid
        for n in range(3)
    ]
    flusher = SpoolFlusher(settings)
    flusher.landing.syncer = failing = FailingSync()
    flusher.last_sync = float("-inf")
    try:
        assert flusher.run_once() == 3  # Before: the round failed with the fsync, nothing landed.
    finally:
        flusher.close()
    assert failing.calls == 1
    cursor = db.execute_sql("SELECT subid FROM click ORDER BY id")
    assert [row[0] for row in cursor.fetchall()] == subids
