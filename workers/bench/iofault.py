"""I/O faults under the real processes: the LD_PRELOAD shim of iofault.c, built and switched from here.

`build_shim` compiles workers/bench/iofault.c with gcc into a directory of the caller's (a bench's
work dir, a test's tmp dir): at run time, never at import. `IoFaults` holds one shim's control file
and log: `preload_env` is what a process needs to carry it (LD_PRELOAD and the two paths), `inject`
switches a fault on for the descriptors whose path matches a glob, `clear` switches it off, and
`events` reads back what was injected and which fsyncs succeeded, so a fault row can say the fault
hit and check what the flusher did after a failed fsync.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workers.bench.errors import BenchError

SOURCE = Path(__file__).with_name("iofault.c")
LIBRARY = "libiofault.so"


def build_shim(directory: Path) -> Path:
    """Compile the shim into `directory`; its path. BenchError (one sentence) without gcc."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise BenchError("the I/O fault shim needs gcc (or cc) to build; install it or skip the row")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / LIBRARY
    result = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(target), str(SOURCE), "-ldl", "-lpthread"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise BenchError(f"the I/O fault shim did not build: {result.stderr.strip()}")
    return target


@dataclass(frozen=True)
class IoEvent:
    pid: int
    call: str  # write, pwrite64, fsync, fdatasync... (injected), `synced` or `pwrote` (traced).
    errno: int
    path: str
    a: int  # A failed fsync's or `synced`'s file size; `pwrote`'s offset; else -1.
    b: int  # `pwrote`'s length; else -1.


class IoFaults:
    """One shim's switch (a control file) and its log, for the files matching `patterns`.

    While it is on (`trace`, `inject`, `clear`), the shim records the matching files' successful
    fsyncs and positional writes; `clear` ends a fault and keeps recording; `off` removes the
    control file (each call then costs one failed stat()).
    """

    def __init__(self, library: Path, directory: Path, patterns: list[str]) -> None:
        self.library = library
        self.control = directory / "iofault.control"
        self.log = directory / "iofault.log"
        self.patterns = patterns

    def preload_env(self, env: dict[str, str]) -> dict[str, str]:
        preload = " ".join(filter(None, [str(self.library), env.get("LD_PRELOAD", "")]))
        return {
            **env,
            "LD_PRELOAD": preload,
            "LANNER_IOFAULT_CONTROL": str(self.control),
            "LANNER_IOFAULT_LOG": str(self.log),
        }

    def inject(self, *, write: str | None = None, fsync: str | None = None, percent: int = 100) -> None:
        """Fail writes (`EIO`, `ENOSPC`, or `drop`: a lost write) and/or fsyncs of matching files."""
        words = [f"write={write}"] if write else []
        words += [f"fsync={fsync}"] if fsync else []
        self._control([*words, f"percent={percent}"])

    def trace(self) -> None:
        self._control([])

    def clear(self) -> None:
        """The fault ends; recording goes on."""
        self._control([])

    def off(self) -> None:
        self.control.unlink(missing_ok=True)

    def _control(self, words: list[str]) -> None:
        text = " ".join([*(f"pattern={pattern}" for pattern in self.patterns), "trace", *words])
        temp = self.control.with_name(self.control.name + ".tmp")
        temp.write_text(text + "\n")
        os.replace(temp, self.control)  # A new inode: every process re-reads it at its next call.

    def events(self) -> list[IoEvent]:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return []
        events = []
        for line in text.splitlines():
            fields = line.split(" ")
            if len(fields) != 6 or not fields[0].isdigit():
                continue  # A line cut by a process killed mid-write.
            try:
                pid, error, a, b = int(fields[0]), int(fields[2]), int(fields[4]), int(fields[5])
            except ValueError:
                continue
            events.append(IoEvent(pid, fields[1], error, fields[3], a, b))
        return events

    def injected(self) -> dict[str, int]:
        """Failures injected so far, by call."""
        counts: dict[str, int] = {}
        for event in self.events():
            if event.call not in TRACED:
                counts[event.call] = counts.get(event.call, 0) + 1
        return counts


TRACED = ("synced", "pwrote")


def fsyncs_retried_as_success(events: list[IoEvent]) -> list[str]:
    """fsyncgate: each fsync that succeeded on a file after one of its fsyncs had failed, without the
    bytes that failed one had not made durable being written again in between. One sentence each.

    After a failed fsync the kernel may have dropped those bytes' dirty pages from writeback, so a
    later fsync's success says nothing about them; only writing them again and syncing that does.
    Appends are not traced, so "written again" means by positional writes (a rewrite in place).
    """
    durable: dict[str, int] = {}  # The size at the file's last fsync that counted.
    failed: dict[str, tuple[int, int]] = {}  # Bytes a failed fsync left undurable: [start, end).
    rewritten: dict[str, list[tuple[int, int]]] = {}
    found = []
    for event in events:
        path = event.path
        if event.call in ("fsync", "fdatasync"):
            start, end = failed.get(path, (durable.get(path, 0), 0))
            failed[path] = (start, max(end, event.a))
            rewritten[path] = []
        elif event.call == "pwrote" and path in failed:
            rewritten[path].append((event.a, event.a + event.b))
        elif event.call == "synced":
            if path in failed:
                start, end = failed.pop(path)
                if not _covers(rewritten.pop(path), start, end):
                    found.append(
                        f"{path}: an fsync succeeded after one failed, bytes {start}-{end} not written again"
                    )
            durable[path] = event.a
    return found


def _covers(ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    reached = start
    for low, high in sorted(ranges):
        if low > reached:
            break
        reached = max(reached, high)
    return reached >= end
