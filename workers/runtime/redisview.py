"""Each web worker's view of Redis (SharedState.status()), published for `lanner status` on its node.

A worker's Redis can fail while Redis answers `lanner status` (or the other way round), so what counts
for clicks is each worker's own view: `DATA_DIR/redis-view/worker-PID.json` (its pid and start time,
so a reused pid is not mistaken for it; its state, since when, the last error, the clicks it answered
alone, its last outage). SharedState calls `WorkerView` when it starts and when its state changes: a
failure, each failed retry (at most once a second per worker while Redis is away) and the recovery;
never on a click that goes as usual. Each write is a new file put in place with `os.replace`, so a
reader never sees half of one; a write that fails is skipped (logged once a minute).

The files are the node's: `lanner status` on a host shows that host's web workers from them. For the
other nodes, each node's `lanner worker` publishes its workers' views in Redis every minute, under a
key that expires after two and a half: `lanner status` on any node lists them, with how long ago each
was published; a node whose summary expired has a `lanner worker` that is stopped or cannot reach
Redis (then its own `lanner status` shows its workers).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# -- other nodes: each node's `lanner worker` publishes its workers' views in Redis ----------------------

NODE_VIEW_TTL_MS = 150_000  # Two missed minutes and a half: gone, the node's summary says nothing.


def node_view_key(prefix: str, node: str) -> str:
    return f"{prefix}node-view:{node}"


def publish_node_view(settings, *, timeout: float = 1.0, now: float | None = None) -> None:
    """Put this node's web workers' views in Redis for `lanner status` on the other nodes, expiring
    after NODE_VIEW_TTL_MS: a node whose `lanner worker` is stopped, or cannot reach Redis, has none."""
    import redis

    now = time.time() if now is None else now
    view = {"published_at": now, "workers": read_views(settings.data_dir, now)}
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        key = node_view_key(settings.redis_prefix, settings.node_id)
        client.set(key, json.dumps(view), px=NODE_VIEW_TTL_MS)
    finally:
        client.close()


def read_node_views(settings, *, timeout: float = 0.5, now: float | None = None) -> dict[str, Any]:
    """The other nodes' published views by node name (each with how long ago it was published); a node
    missing here has published none in the last NODE_VIEW_TTL_MS. {"error": ...} when Redis does not
    answer this process."""
    import redis

    now = time.time() if now is None else now
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout)
    start = len(node_view_key(settings.redis_prefix, ""))
    nodes: dict[str, Any] = {}
    try:
        for key in client.scan_iter(match=node_view_key(settings.redis_prefix, "*"), count=100):
            node = key.decode()[start:]
            value = client.get(key)
            if node == settings.node_id or value is None:
                continue
            try:
                view = json.loads(value)
                ago = round(max(0.0, now - view["published_at"]), 1)
                # Each worker's state as of its last write, counted from now (degraded_s: at that time).
                workers = [
                    {**worker, "as_of_s_ago": round(worker["as_of_s_ago"] + ago, 1)}
                    for worker in view["workers"]
                ]
                nodes[node] = {"published_s_ago": ago, "workers": workers}
            except (ValueError, KeyError, TypeError):
                continue
    except redis.RedisError as error:
        return {"error": str(error) or type(error).__name__}
    finally:
        client.close()
    return dict(sorted(nodes.items()))
