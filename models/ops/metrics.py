"""The metrics every node exposes on `/metrics` (Prometheus' text format), and the counters behind them.

Counters are counted where they happen, in the web workers, and summed by whoever serves `/metrics`
(the admin worker, or a web worker when there is none). Each web worker counts into a slot: a small
file under DATA_DIR/metrics/ mapped into its memory (MAP_SHARED), so a count is one add to a 64-bit
word (~50 ns, no system call, no lock: one process writes a slot), and a reader maps every slot
read-only and adds them up. A worker takes the first slot nobody holds an flock on and keeps the
flock while it runs; a worker that exits (recycled, killed) leaves its counts in its slot, and the
next worker to start takes the slot over and counts on from there. So the sums only grow, across
worker restarts and server restarts alike, and there are never more slots than workers ever ran at
once. A slot whose layout is not this code's (an upgrade changed the catalogue) is zeroed by the
worker that takes it: Prometheus reads the drop as a counter reset, which it handles.

A slot's bytes are written as zeros when it is made, never left as a hole: on a full disk a write
through a mapping into a hole would kill the worker with SIGBUS; overwriting allocated bytes needs no
space (ext4, xfs, tmpfs). On a copy-on-write file system (btrfs, ZFS) an overwrite needs space too,
and a full disk could stop a worker at its next count: keep DATA_DIR off one (the spool's refusal
count, models/clicks/refusals.py, has the same caveat, but a failed write there is only skipped).

Gauges (the spool's depth and age, queue depths, each dependency's state) are not counted: the server
of `/metrics` looks at them when asked (workers/ops/metrics.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

SLOT_DIR = "metrics"
SLOT_SUFFIX = ".counters"

# Request latency buckets (seconds); the last bucket, +Inf, is implied.
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LATENCY_BOUNDS_NS = tuple(int(bound * 1e9) for bound in LATENCY_BOUNDS)


@dataclass(frozen=True)
class Metric:
    """One metric family as documented and exposed: its name, type, help and label name (if any)."""

    name: str
    kind: str  # counter, gauge or histogram
    help: str
    label: str = ""  # The one label its samples are told apart by ("" for none).
    values: tuple[str, ...] = ()  # The label's values, for counters counted in slots.


CLICK_OUTCOMES = ("stored", "repeat", "refused", "unknown_campaign", "prefetch")
REDIRECT_OUTCOMES = ("click", "repeat", "fallback", "lp_click")
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")

# Counted in the slots, in this order (the slot layout follows from it).
CLICKS = Metric(
    "lanner_clicks_total",
    "counter",
    "Campaign URL requests by outcome: stored (a new click journaled), repeat (within debounce: the "
    "earlier click's answer), refused (the spool could not be written: an LP click's too), "
    "unknown_campaign, prefetch (a browser prefetch or subresource: not counted as a click). The "
    "Click API and pixels count their stored, repeated and refused clicks here too.",
    "outcome",
    CLICK_OUTCOMES,
)
REDIRECTS = Metric(
    "lanner_redirects_total",
    "counter",
    "302 answers by outcome: click (a new click's offer or lander), repeat (a debounced click's), "
    "fallback (LANNER_FALLBACK_URL: unknown campaign, or a refused click with "
    "LANNER_SPOOL_FULL_ANSWER=fallback), lp_click (a lander's link to its offer).",
    "outcome",
    REDIRECT_OUTCOMES,
)
RESPONSES = Metric(
    "lanner_http_responses_total",
    "counter",
    "Answers of the web workers (campaign URLs, postbacks, pixels, the Click API, health) by status class.",
    "code",
    STATUS_CLASSES,
)
LATENCY = Metric(
    "lanner_http_request_duration_seconds",
    "histogram",
    "Time the web workers' app took per request, from the request's arrival in the app to its answer "
    "(bjoern's parsing and the network are not in it).",
)
SLOT_METRICS = (CLICKS, REDIRECTS, RESPONSES, LATENCY)

# Looked at when `/metrics` is asked (workers/ops/metrics.py).
GAUGES = (
    Metric(
        "lanner_dependency_up",
        "gauge",
        "1 while the dependency works as this node sees it, 0 while it does not: database, redis (cluster "
        "mode: 0 while any web worker of this node answers clicks without it), consumer (`lanner worker`'s "
        "flusher beats), spool (the journal can be written: the node can take clicks).",
        "dependency",
    ),
    Metric(
        "lanner_spool_pending_clicks",
        "gauge",
        "Clicks journaled on this node and not in the database yet (LP clicks included).",
    ),
    Metric("lanner_spool_pending_bytes", "gauge", "Bytes of the journal not landed in the database yet."),
    Metric(
        "lanner_spool_oldest_age_seconds",
        "gauge",
        "Age of the oldest click not in the database yet: the flush lag (0 when none waits).",
    ),
    Metric(
        "lanner_flusher_heartbeat_age_seconds",
        "gauge",
        "Seconds since the spool flusher last wrote its heartbeat (absent when it never ran here).",
    ),
    Metric(
        "lanner_flusher_last_landed_age_seconds",
        "gauge",
        "Seconds since the flusher last landed a batch of clicks (absent when it never landed any).",
    ),
    Metric(
        "lanner_postbacks_parked",
        "gauge",
        "Postbacks waiting for their click to land (absent while the database does not answer).",
    ),
    Metric(
        "lanner_outbound_postbacks_pending",
        "gauge",
        "Outbound postbacks waiting to be sent (absent while the database does not answer).",
    ),
    Metric(
        "lanner_queue_tasks_pending",
        "gauge",
        "Tasks waiting in the Huey queue (absent while it cannot be read).",
    ),
    Metric("lanner_clicks_refused_total", "counter", "Clicks refused ever because the spool was unwritable."),
    Metric("lanner_node_info", "gauge", "Always 1; its label names this node (LANNER_NODE_ID).", "node"),
)
CATALOGUE = (*SLOT_METRICS, *GAUGES)


def _layout() -> tuple[dict[str, int], int]:
    """Each slot word's index (by "name|label value", the histogram's by "name|bucket N" and "|sum";
    its count is the buckets' sum) and the number of words."""
    index: dict[str, int] = {}
    for metric in SLOT_METRICS:
        if metric.kind == "histogram":
            keys = [f"bucket {n}" for n in range(len(LATENCY_BOUNDS) + 1)] + ["sum"]
        else:
            keys = list(metric.values)
        for key in keys:
            index[f"{metric.name}|{key}"] = len(index)
    return index, len(index)


WORDS, WORD_COUNT = _layout()
# The slot's first word: this layout's fingerprint, so a slot of another layout is never summed.
LAYOUT_ID = int.from_bytes(hashlib.sha256("\n".join(WORDS).encode()).digest()[:8], "little") or 1
SLOT_BYTES = 8 * (1 + WORD_COUNT)

# The indexes the counting code uses (into `counts`, which starts after the layout word).
CLICK_STORED, CLICK_REPEAT, CLICK_REFUSED, CLICK_UNKNOWN, CLICK_PREFETCH = (
    WORDS[f"{CLICKS.name}|{outcome}"] for outcome in CLICK_OUTCOMES
)
REDIRECT_CLICK, REDIRECT_REPEAT, REDIRECT_FALLBACK, REDIRECT_LP_CLICK = (
    WORDS[f"{REDIRECTS.name}|{outcome}"] for outcome in REDIRECT_OUTCOMES
)
# A status line's first character -> its class's word (anything else is not counted).
STATUS_WORDS = {cls[0]: WORDS[f"{RESPONSES.name}|{cls}"] for cls in STATUS_CLASSES}
LATENCY_FIRST_BUCKET = WORDS[f"{LATENCY.name}|bucket 0"]
LATENCY_SUM_US = WORDS[f"{LATENCY.name}|sum"]  # Microseconds: the words are integers.


def unshared_counts() -> memoryview:
    """Counts of this process alone, for a tracker no server reads (`lanner simulate`, tests)."""
    return memoryview(bytearray(8 * WORD_COUNT)).cast("Q")


def slot_dir(data_dir: Path) -> Path:
    return data_dir / SLOT_DIR


class CounterSlot:
    """A web worker's slot: `counts[i] += 1` counts (see the module doc). Kept for the process's life;
    the kernel drops the flock when it exits."""

    def __init__(self, data_dir: Path) -> None:
        directory = slot_dir(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.fd, self.path = _claim(directory)
        self.map = mmap.mmap(self.fd, SLOT_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.counts = memoryview(self.map)[8:].cast("Q")


def _claim(directory: Path) -> tuple[int, Path]:
    number = 0
    while True:
        path = directory / f"slot-{number}{SLOT_SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            number += 1
            continue
        try:
            _prepare(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd, path


def _prepare(fd: int) -> None:
    """A slot of this layout, its bytes allocated: kept as it is, else zeroed and marked."""
    if os.fstat(fd).st_size == SLOT_BYTES and os.pread(fd, 8, 0) == LAYOUT_ID.to_bytes(8, "little"):
        return
    os.ftruncate(fd, 0)
    data = LAYOUT_ID.to_bytes(8, "little") + bytes(8 * WORD_COUNT)
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError(f"a short write of the metrics slot ({len(data)} bytes)")


def read_totals(data_dir: Path) -> list[int]:
    """Every slot's counts added up (slots of another layout left out): the words of WORDS."""
    totals = [0] * WORD_COUNT
    directory = slot_dir(data_dir)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return totals
    for name in names:
        if not name.endswith(SLOT_SUFFIX):
            continue
        try:
            fd = os.open(directory / name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            if os.fstat(fd).st_size != SLOT_BYTES:
                continue  # Being made, or of another layout.
            # Mapped, not read: each word is one aligned 8-byte load, never half of a write.
            with mmap.mmap(fd, SLOT_BYTES, mmap.MAP_SHARED, mmap.PROT_READ) as mapped:
                words = memoryview(mapped).cast("Q")
                try:
                    if words[0] == LAYOUT_ID:
                        for i in range(WORD_COUNT):
                            totals[i] += words[i + 1]
                finally:
                    words.release()
        finally:
            os.close(fd)
    return totals
