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

`dependencies` names each dependency with its state as this worker sees it: the database, Redis
(cluster mode), the consumer (`lanner worker`) and the spool, with the spool's backlog (clicks waiting
to land, the oldest one's age: workers/runtime/spoolwatch.py), counted from the flusher's heartbeat
while the database does not answer.

For balancers and orchestrators, two checks that read nothing of the dependencies:
- `GET /livez`: the worker answers (200, always: restart the process only when this fails);
- `GET /readyz`: this node can take and journal clicks: its campaigns are loaded and its spool can
  be written. 503 only when clicks would be refused (a full disk), never for a PostgreSQL or Redis
  outage, during which the node goes on taking clicks into its spool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import falcon

from models.clicks.tracker import ClickTracker
from models.store.database import STORE_ERRORS
from models.store.maintenance import MaintenanceStore
from workers.runtime.spoolwatch import SpoolWatch

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


class LivezResource:
    """`/livez`: the worker answers. Nothing is looked at: a worker that answers is alive."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.cache_control = ("no-store",)
        resp.media = {"status": "ok"}


class ReadyzResource:
    """`/readyz`: this node can take and journal clicks (see the module doc)."""

    def __init__(self, tracker: ClickTracker, spool: SpoolWatch) -> None:
        self.tracker = tracker
        self.spool = spool

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        is_writable, reason = self.spool.writable(self.tracker.refused_at)
        is_loaded = self.tracker.config_version is not None
        problems = [] if is_writable else [reason]
        if not is_loaded:
            problems.append("the campaigns are not loaded")
        resp.cache_control = ("no-store",)
        resp.media = {
            "status": "ready" if not problems else "not ready",
            "campaigns": len(self.tracker.campaigns),
            "problems": problems,
        }
        if problems:
            resp.status = falcon.HTTP_503
            resp.set_header("Retry-After", "5")


class HealthResource:
    def __init__(
        self,
        tracker: ClickTracker,
        consumer_status: Callable[[], dict[str, Any]],
        spool: SpoolWatch | None = None,
    ) -> None:
        self.tracker = tracker
        self.consumer_status = consumer_status  # workers/runtime/heartbeat.py ConsumerWatch
        self.spool = spool

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
        dependencies = self._dependencies(database, consumer)
        is_degraded = (
            database != "ok"
            or bool(consumer["problems"])
            or any(shown["state"] == "down" for shown in dependencies.values())
        )
        resp.cache_control = ("no-store",)
        resp.media = {
            "status": "degraded" if is_degraded else "ok",
            "database": database,
            "campaigns": len(self.tracker.campaigns),
            "recent_visits": len(self.tracker.index),
            "consumer": consumer,
            "dependencies": dependencies,
        }
        if is_degraded and is_strict:
            resp.status = falcon.HTTP_503

    def _dependencies(self, database: str, consumer: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Each dependency by name: `state` up or down (unknown: it cannot be looked at from here)."""
        shown: dict[str, dict[str, Any]] = {"database": {"state": "up"}}
        if database != "ok":
            shown["database"] = {"state": "down", "error": database.removeprefix("does not answer: ")}
        shared = self.tracker.shared
        if shared is not None:  # Cluster mode: this worker's own view (errors may name the URL: left out).
            if shared.is_degraded:
                since = shared.degraded_since
                down_s = None if since is None else round(max(0.0, time.time() - since), 1)
                shown["redis"] = {"state": "down", "down_s": down_s, "clicks_alone": shared.alone_clicks}
            else:
                shown["redis"] = {"state": "up"}
        consumer_state = consumer.get("state")
        shown["consumer"] = {
            "state": "up" if consumer_state == "ok" else "unknown" if consumer_state == "unknown" else "down",
            "consumer_state": consumer_state,
        }
        if self.spool is not None:
            db = self.tracker.db if database == "ok" else None
            shown["spool"] = self.spool.status(db, self.tracker.refused_at)
        return shown
