"""Reading other processes from Linux's /proc: children, CPU ticks, start time, resident memory.

Shared by `lanner status` and the bench harness; a process that is gone reads as empty/None.
"""

from __future__ import annotations

import os

# Thread names (/proc/<pid>/task/<tid>/comm) of `lanner worker`'s own threads, set by each as it
# starts: the bench's idle step tells their CPU from the Huey consumer's around them.
FLUSHER_THREAD = "lanner-flusher"
SWEEPS_THREAD = "lanner-sweeps"


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found.extend(int(child) for child in file.read().split())
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found


def process_tree(pid: int) -> list[int]:
    """`pid` and all its live descendants (via /proc/<pid>/task/*/children)."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children(current))
    return tree


def stat_fields(pid: int, tid: int | None = None) -> list[str] | None:
    """/proc/<pid>/stat (with `tid`, its thread's /proc/<pid>/task/<tid>/stat) from field 3 (state) on,
    or None once the process (or thread) is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as file:
            stat = file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2 :].split()


def is_alive(pid: int) -> bool:
    """A process with this pid exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start_time(pid: int) -> int | None:
    """Field 22 of proc(5): when the process started, in clock ticks after boot; its identity with the pid."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else None


def uptime_seconds(pid: int) -> float | None:
    """How long the process has been running."""
    started = process_start_time(pid)
    if started is None:
        return None
    with open("/proc/uptime") as file:
        host_uptime = float(file.read().split()[0])
    return round(host_uptime - started / os.sysconf("SC_CLK_TCK"), 1)


def rss_kb(pid: int) -> int | None:
    """VmRSS of the process in KiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def pss_kb(pid: int) -> int | None:
    """Proportional set size in KiB (shared pages divided among their sharers), or None once it is gone.

    Summed over processes this is the memory they really use together; summed VmRSS counts a page
    shared by the master and its forked workers once per process.
    """
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def process_name(pid: int) -> str:
    """The process's short name (/proc/<pid>/comm): a worker sets it to lanner-web or lanner-admin."""
    try:
        with open(f"/proc/{pid}/comm") as file:
            return file.read().strip()
    except OSError:
        return ""


def set_process_name(name: str) -> None:
    """Name this process in /proc/self/comm (15 characters; what `ps -o comm` and `top` show)."""
    try:
        with open("/proc/self/comm", "w") as file:
            file.write(name[:15])
    except OSError:
        pass


def set_thread_name(name: str) -> None:
    """Name the calling thread in /proc/thread-self/comm, so that /proc/<pid>/task/<tid>/comm tells a
    process's threads apart (the bench's idle step splits `lanner worker` into flusher and consumer)."""
    try:
        with open("/proc/thread-self/comm", "w") as file:
            file.write(name[:15])
    except OSError:
        pass


def thread_names(pid: int) -> dict[int, str]:
    """`pid`'s threads: thread id -> name (/proc/<pid>/task/<tid>/comm); empty once it is gone."""
    names = {}
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/comm") as file:
                names[int(task)] = file.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        pass
    return names
