"""`GET /healthz`: the worker is up and its database answers (web and admin workers)."""

from __future__ import annotations

import falcon

from models.tracking import ClickTracker


class DatabaseHealthResource:
    """The admin worker's `/healthz`: its database answers."""

    def __init__(self, db) -> None:
        self.db = db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.db.execute_sql("SELECT 1").fetchall()
        resp.cache_control = ("no-store",)
        resp.media = {"status": "ok", "role": "admin"}


class HealthResource:
    def __init__(self, tracker: ClickTracker) -> None:
        self.tracker = tracker

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        cursor = self.tracker.conn.execute("SELECT 1")
        cursor.fetchall()
        resp.cache_control = ("no-store",)
        resp.media = {
            "status": "ok",
            "campaigns": len(self.tracker.campaigns),
            "recent_visits": len(self.tracker.index),
        }
