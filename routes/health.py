"""`GET /healthz`: the worker is up, and what it depends on (web and admin workers).

A web worker says whether clicks are landing: `status` is `degraded` (with `problems`) when its
database does not answer, when the consumer is stopped or stuck, or when the oldest unflushed click is
older than LANNER_BACKLOG_ALERT_SECONDS. That stays a 200, since the worker still takes every click and
keeps it in the spool: a load balancer must not take it out (in cluster mode a PostgreSQL outage would
take every node out at once). `?strict=1` answers 503 instead, for monitors that read only the code.
The admin worker, which cannot serve the panel or the API without its database, answers 503 then.

Near the open-file limit the check opens nothing: the database is asked on the worker's open
connection, the consumer through workers/runtime/heartbeat.py's ConsumerWatch (open descriptors,
else its last look). A check that cannot run answers 503 with one sentence, never a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import falcon

from models.clicks.tracker import ClickTracker
from models.store.database import STORE_ERRORS
from models.store.maintenance import MaintenanceStore

logger = logging.getLogger(__name__)


def cannot_check(what: str, exc: Exception) -> falcon.HTTPServiceUnavailable:
    """The 503 of a health check that could not run, with the reason in one sentence."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    logger.warning("/healthz: %s: %s", what, reason)
    return falcon.HTTPServiceUnavailable(
        title="Unhealthy", description=f"This worker's {what}: {reason}.", retry_after=5
    )


class DatabaseHealthResource:
    """The admin worker's `/healthz`: its database answers."""

    def __init__(self, db) -> None:
        self.db = db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            MaintenanceStore(self.db.connection()).ping()
        except STORE_ERRORS + (OSError,) as exc:
            raise cannot_check("database does not answer", exc) from None
        resp.cache_control = ("no-store",)
        resp.media = {"status": "ok", "role": "admin"}


class HealthResource:
    def __init__(self, tracker: ClickTracker, consumer_status: Callable[[], dict[str, Any]]) -> None:
        self.tracker = tracker
        self.consumer_status = consumer_status  # workers/runtime/heartbeat.py ConsumerWatch

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        is_strict = req.get_param_as_bool("strict", default=False)
        try:
            MaintenanceStore(self.tracker.conn).ping()  # The open connection: no new descriptor.
            database = "ok"
        except STORE_ERRORS as exc:
            database = f"does not answer: {exc}"
            logger.warning("/healthz: the database %s", database)
        try:
            consumer = self.consumer_status()
        except STORE_ERRORS:  # The backlog's age starts at the landed position, in the database.
            consumer = {
                "state": "unknown",
                "problems": ["the spool's backlog cannot be measured while the database does not answer"],
            }
        except OSError as exc:  # ConsumerWatch answers EMFILE itself: anything else that could not run.
            raise cannot_check("health check could not run", exc) from None
        is_degraded = database != "ok" or bool(consumer["problems"])
        resp.cache_control = ("no-store",)
        resp.media = {
            "status": "degraded" if is_degraded else "ok",
            "database": database,
            "campaigns": len(self.tracker.campaigns),
            "recent_visits": len(self.tracker.index),
            "consumer": consumer,
        }
        if is_degraded and is_strict:
            resp.status = falcon.HTTP_503
