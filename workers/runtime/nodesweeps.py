"""The sweeps of a node's own files, on their crontab, in a thread of `lanner worker` (cluster mode).

On one box they are Huey periodic tasks. With Huey on Redis a task queued by one node may run on any
node's consumer, but the geo files, the crawler ranges and the columnar history (LANNER_HISTORY_NODE's)
are in each node's data directory: every node must keep its own. So in cluster mode they are not
queued at all: this thread runs each job once at start (as `lanner worker` queues them on one box) and
then at every minute its crontab matches (UTC, as Huey's schedule with utc=True). A job that fails is
logged; its next tick tries again.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Sequence

from workers.runtime.procfs import SWEEPS_THREAD, set_thread_name

logger = logging.getLogger(__name__)

# A job: its name, Huey's crontab (a function of a naive UTC datetime), and what it runs.
NodeJob = tuple[str, Callable[[datetime.datetime], bool], Callable[[], object]]


class NodeSweepThread(threading.Thread):
    def __init__(self, jobs: Sequence[NodeJob]) -> None:
        super().__init__(name="lanner-node-sweeps", daemon=True)
        self.jobs = jobs
        self.stopping = threading.Event()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.join(timeout)

    def run(self) -> None:
        set_thread_name(SWEEPS_THREAD)
        for name, _, job in self.jobs:
            self.attempt(name, job)
        minute = int(time.time() // 60)
        while True:
            minute = max(minute + 1, int(time.time() // 60))  # Each minute once, even after a late wake.
            if self.stopping.wait(max(0.0, minute * 60 - time.time())):
                return
            at = datetime.datetime.fromtimestamp(minute * 60, datetime.UTC).replace(tzinfo=None)
            for name, is_due, job in self.jobs:
                if not self.stopping.is_set() and is_due(at):
                    self.attempt(name, job)

    @staticmethod
    def attempt(name: str, job: Callable[[], object]) -> None:
        try:
            job()
        except Exception:
            logger.exception("%s failed on this node; its next tick tries again", name)
