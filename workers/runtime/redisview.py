"""Each web worker's view of Redis (SharedState.status()), published for `lanner status` on its node.

A worker's Redis can fail while Redis answers `lanner status` (or the other way round), so what counts
for clicks is each worker's own view: `DATA_DIR/redis-view/worker-PID.json` (its pid and start time,
so a reused pid is not mistaken for it; its state, since when, the last error, the clicks it answered
alone, its last outage). SharedState calls `WorkerView` when it starts and when its state changes: a
failure, each failed retry (at most once a second per worker while Redis is away) and the recovery;
never on a click that goes as usual. Each write is a new file put in place with `os.replace`, so a
reader never sees half of one; a write that fails is skipped (logged once a minute).

The files are the node's: `lanner status` on a host shows that host's web workers. Another node's
workers are seen by running `lanner status` there.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

from models.clicks.throttledlog import ThrottledLog
from workers.runtime.heartbeat import is_running
from workers.runtime.procfs import process_start_time

logger = logging.getLogger(__name__)

VIEW_DIR = "redis-view"
PREFIX = "worker-"


def view_dir(data_dir: Path) -> Path:
    return data_dir / VIEW_DIR


class WorkerView:
    """A web worker's side: `on_change` for its SharedState. `mask(text)` takes a secret out of an error."""

    def __init__(self, data_dir: Path, mask: Callable[[str], str], clock: Callable[[], float] = time.time):
        self.dir = view_dir(data_dir)
        self.mask = mask
        self.clock = clock
        self.pid = os.getpid()
        self.start = process_start_time(self.pid)
        self._log = ThrottledLog(logger, logging.WARNING, interval=60.0)

    @property
    def path(self) -> Path:
        return self.dir / f"{PREFIX}{self.pid}.json"

    def __call__(self, status: dict[str, Any]) -> None:
        view = {
            **status,
            "last_error": self.mask(status.get("last_error") or ""),
            "pid": self.pid,
            "start": self.start,
            "updated_at": self.clock(),
        }
        partial = self.dir / f".{PREFIX}{self.pid}.partial"
        try:
            self.dir.mkdir(exist_ok=True)
            partial.write_text(json.dumps(view))
            os.replace(partial, self.path)
        except OSError as error:
            self._log("cannot publish this worker's Redis state in %s: %s", self.dir, error)


def read_views(data_dir: Path, now: float | None = None) -> list[dict[str, Any]]:
    """The views of the node's running web workers, by pid, as `lanner status` shows them; the files of
    workers gone are removed (a worker killed leaves its file)."""
    now = time.time() if now is None else now
    views = []
    try:
        paths = sorted(view_dir(data_dir).glob(f"{PREFIX}*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            view = json.loads(path.read_text())
            pid = int(view["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not is_running(pid, view.get("start")):
            try:
                path.unlink()
            except OSError:
                pass
            continue
        since = view.get("degraded_since")
        outage = view.get("last_outage")
        shown = {
            "pid": pid,
            "state": view.get("state"),
            "degraded_s": None if since is None else round(max(0.0, now - since), 1),
            "alone_clicks": view.get("alone_clicks", 0),
            "last_error": view.get("last_error", ""),
            "as_of_s_ago": round(max(0.0, now - view.get("updated_at", now)), 1),
        }
        if outage:
            shown["last_outage"] = {
                "ended_s_ago": round(max(0.0, now - outage["ended_at"]), 1),
                "seconds": outage["seconds"],
                "alone_clicks": outage["alone_clicks"],
            }
        views.append(shown)
    return sorted(views, key=lambda view: view["pid"])
