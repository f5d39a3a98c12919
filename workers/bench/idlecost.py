"""The cluster bench's idle step: what every process costs with no click at all (issue 33).

A click's CPU in a bench step is its own work plus the fixed cost of whatever wakes up on a timer
(a flusher looking at an empty journal, Huey's consumer asking Redis, the minute's periodic tasks,
a worker's watch thread), shared by the step's clicks: on four nodes each node's fixed cost is
spread over a quarter of them. This step measures that fixed cost alone, beside the ladder, so
that every run shows it and how much of a click's CPU at each rate it is.

CPU is read per kind of process (per thread where one process does two jobs: `lanner worker`'s
flusher thread and the Huey consumer around it, told apart by their thread names), from /proc,
over the same window for both sides.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workers.runtime.procfs import (
    FLUSHER_THREAD,
    SWEEPS_THREAD,
    process_name,
    process_tree,
    stat_fields,
    thread_names,
)

# The kinds, in the order the table shows them.
IDLE_KINDS = ("web", "admin", "flusher", "consumer", "sweeps", "postgresql", "redis", "nginx")
THREAD_KINDS = {FLUSHER_THREAD: "flusher", SWEEPS_THREAD: "sweeps"}  # Other threads: "consumer".
TICK_EVERY = 1.0  # Seconds between looks at the processes (alive; the reporter's progress).


@dataclass(frozen=True)
class Unit:
    """One thing whose CPU ticks are read: a whole process, or one thread of one."""

    kind: str
    pid: int
    tid: int | None = None

    def ticks(self) -> int:
        """utime + stime so far; 0 once it is gone."""
        fields = stat_fields(self.pid, self.tid)
        return int(fields[11]) + int(fields[12]) if fields else 0


def serve_units(pid: int) -> list[Unit]:
    """`lanner serve`'s tree: its web workers (and the master, which only watches them) and, when
    it runs, its admin worker."""
    return [
        Unit("admin" if process_name(member) == "lanner-admin" else "web", member)
        for member in process_tree(pid)
    ]


def worker_units(pid: int) -> list[Unit]:
    """`lanner worker`'s threads: the spool flusher's, the node sweeps', and the rest (Huey's consumer:
    its scheduler, its worker threads, the main thread)."""
    return [
        Unit(THREAD_KINDS.get(name, "consumer"), member, tid)
        for member in process_tree(pid)
        for tid, name in thread_names(member).items()
    ]


def tree_units(kind: str, pid: int) -> list[Unit]:
    return [Unit(kind, member) for member in process_tree(pid)]


def measure_idle(
    sides: dict[str, list[Unit]],
    seconds: float,
    *,
    nodes: dict[str, int],
    on_tick: Callable[[float], None] = lambda elapsed: None,
) -> dict[str, dict]:
    """CPU of each side's units over `seconds` with no traffic: per kind, milliseconds of CPU a second
    (all its processes together), per node (`nodes[side]` of them), and how many processes or threads."""
    before = {side: {unit: unit.ticks() for unit in units} for side, units in sides.items()}
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        on_tick(elapsed)
        time.sleep(min(TICK_EVERY, seconds - elapsed))
    wall = time.monotonic() - started
    after = {side: {unit: unit.ticks() for unit in units} for side, units in sides.items()}
    hertz = os.sysconf("SC_CLK_TCK")
    result: dict[str, dict] = {}
    for side, units in sides.items():
        kinds: dict[str, dict] = {}
        for kind in IDLE_KINDS:
            mine = [unit for unit in units if unit.kind == kind]
            if not mine:
                continue
            # A process gone meanwhile (a recycled worker) reads 0 after: its ticks are not counted.
            ticks = sum(max(0, after[side][unit] - before[side][unit]) for unit in mine)
            ms_per_s = ticks * 1000 / hertz / wall
            kinds[kind] = {
                "ms_per_s": round(ms_per_s, 2),
                "ms_per_s_per_node": round(ms_per_s / nodes[side], 2),
                "units": len(mine),
            }
        total = sum(part["ms_per_s"] for part in kinds.values())
        result[side] = {"kinds": kinds, "ms_per_s": round(total, 2), "nodes": nodes[side]}
    result["seconds"] = round(wall, 1)
    return result


def idle_us_per_click(idle: dict, side: str, rate: int, kinds: Iterable[str] | None = None) -> float | None:
    """The fixed cost of `side` (its `kinds`, or all) as µs of CPU a click at `rate` clicks/s."""
    part = idle.get(side)
    if not part or not rate:
        return None
    names = part["kinds"] if kinds is None else [kind for kind in kinds if kind in part["kinds"]]
    return round(sum(part["kinds"][kind]["ms_per_s"] for kind in names) * 1000 / rate, 1)
