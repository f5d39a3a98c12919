"""`GET /healthz`: the worker is up and its database answers (web and admin workers).

A web worker also says whether clicks are landing: `status` is `degraded` (with `problems`) when the
consumer is stopped or stuck or the oldest unflushed click is older than LANNER_BACKLOG_ALERT_SECONDS.
That stays a 200, since the worker still takes every click and keeps it in the spool: a load
balancer must not take it out. `?strict=1` answers 503 instead, for monitors that read only the code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon

from models.clicks.tracker import ClickTracker
from models.store.maintenance import MaintenanceStore


class DatabaseHealthResource:
    """The admin worker's `/healthz`: its database answers."""

    def __init__(self, db) -> None:
        self.db = db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        MaintenanceStore(self.db.connection()).ping()
        resp.cache_control = ("no-store",)
        resp.media = {"status": "ok", "role": "admin"}


class HealthResource:
    def __init__(self, tracker: ClickTracker, consumer_status: Callable[[], dict[str, Any]]) -> None:
        self.tracker = tracker
        self.consumer_status = consumer_status  # workers/runtime/heartbeat.py

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        is_strict = req.get_param_as_bool("strict", default=False)
        MaintenanceStore(self.tracker.conn).ping()
        consumer = self.consumer_status()
        is_degraded = bool(consumer["problems"])
        resp.cache_control = ("no-store",)
        resp.media = {
            "status": "degraded" if is_degraded else "ok",
            "campaigns": len(self.tracker.campaigns),
            "recent_visits": len(self.tracker.index),
            "consumer": consumer,
        }
        if is_degraded and is_strict:
            resp.status = falcon.HTTP_503
