"""`/metrics`: the node's metrics in Prometheus' text exposition format (version 0.0.4).

The counters are the web workers' slots added up (models/ops/metrics.py); the gauges are looked at
now, from the process that answers (the admin worker, at idle priority: a scrape never takes CPU from
clicks). A dependency that does not answer makes its `lanner_dependency_up` 0 and leaves out the
gauges only it could give (parked postbacks, outbound postbacks while the database is away): an
absent sample, never a made-up 0. Nothing here is a secret: counts, ages, states and the node's name,
no URL, no error text (an error may name a host or a user).
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from models.ops.metrics import (
    CATALOGUE,
    LATENCY,
    LATENCY_BOUNDS,
    SLOT_METRICS,
    WORDS,
    Metric,
    read_totals,
)
from settings import Settings
from workers.runtime.spoolwatch import SpoolWatch

if TYPE_CHECKING:
    from peewee import Database

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FAMILIES = {metric.name: metric for metric in CATALOGUE}


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(round(value, 6))


def _escape_help(text: str) -> str:
    """HELP text: a backslash and a line feed escaped (a quote is itself there)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape(value: str) -> str:
    """A label value: a backslash, a line feed and a double quote escaped."""
    return _escape_help(value).replace('"', '\\"')


def _family(metric: Metric, samples: list[tuple[str, dict[str, str], float]]) -> list[str]:
    """One family's # HELP, # TYPE and samples (suffix, labels, value)."""
    lines = [f"# HELP {metric.name} {_escape_help(metric.help)}", f"# TYPE {metric.name} {metric.kind}"]
    for suffix, labels, value in samples:
        shown = ",".join(f'{name}="{_escape(text)}"' for name, text in labels.items())
        braces = f"{{{shown}}}" if shown else ""
        lines.append(f"{metric.name}{suffix}{braces} {_number(value)}")
    return lines


def counter_samples(totals: list[int]) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """The slot metrics' samples from the summed words (the histogram's buckets made cumulative)."""
    samples: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for metric in SLOT_METRICS:
        if metric is LATENCY:
            running = 0  # The buckets are counted each on its own: made cumulative here.
            rows: list[tuple[str, dict[str, str], float]] = []
            for n, bound in enumerate([*LATENCY_BOUNDS, math.inf]):
                running += totals[WORDS[f"{metric.name}|bucket {n}"]]
                rows.append(("_bucket", {"le": "+Inf" if math.isinf(bound) else repr(bound)}, running))
            rows.append(("_sum", {}, totals[WORDS[f"{metric.name}|sum"]] / 1e6))
            rows.append(("_count", {}, running))
            samples[metric.name] = rows
        else:
            samples[metric.name] = [
                ("", {metric.label: value}, totals[WORDS[f"{metric.name}|{value}"]])
                for value in metric.values
            ]
    return samples


class MetricsSource:
    """What `/metrics` answers, for one process (it keeps its spool counting between scrapes)."""

    def __init__(self, settings: Settings, db: Database | None) -> None:
        """`db` None: the process has no database (it was away when the admin worker started)."""
        self.settings = settings
        self.db = db
        self.spool = SpoolWatch(settings.spool_dir, settings.data_dir)

    def render(self) -> str:
        samples = counter_samples(read_totals(self.settings.data_dir))
        samples.update(self.gauges())
        lines: list[str] = []
        for metric in CATALOGUE:
            if metric.name in samples:
                lines += _family(metric, samples[metric.name])
        return "\n".join(lines) + "\n"

    def gauges(self) -> dict[str, list[tuple[str, dict[str, str], float]]]:
        from models.clicks.refusals import read_refused
        from models.store.conversions import PostbackLogStore
        from models.store.database import STORE_ERRORS
        from models.store.deliveries import DeliveryStore
        from models.store.maintenance import MaintenanceStore
        from workers.runtime.heartbeat import heartbeat_path, is_running, judge_consumer, read_heartbeat

        settings = self.settings
        now = time.time()
        gauges: dict[str, list[tuple[str, dict[str, str], float]]] = {}
        up: dict[str, int] = {"database": 0}
        db = self.db
        if db is not None:
            try:
                MaintenanceStore(db.connection()).ping()
                up["database"] = 1
            except STORE_ERRORS:
                pass
        if settings.redis_url:
            from workers.runtime.redisview import read_views

            up["redis"] = int(all(view["state"] != "degraded" for view in read_views(settings.data_dir, now)))
        refused, refused_at = read_refused(settings.spool_dir)
        spool = self.spool.status(db if up["database"] else None, refused_at / 1000)
        beat = read_heartbeat(heartbeat_path(settings.data_dir))
        alive = beat is not None and is_running(beat["pid"], beat.get("start"))
        consumer = judge_consumer(beat, alive, spool["oldest_s"], now, settings.backlog_alert_seconds)
        up["consumer"] = int(consumer["state"] == "ok")
        up["spool"] = int(spool["state"] == "up")
        gauges["lanner_dependency_up"] = [("", {"dependency": name}, value) for name, value in up.items()]
        for name, key in (
            ("lanner_spool_pending_clicks", "pending_clicks"),
            ("lanner_spool_pending_bytes", "pending_bytes"),
            ("lanner_spool_oldest_age_seconds", "oldest_s"),
        ):
            if spool.get(key) is not None:
                gauges[name] = [("", {}, spool[key])]
        for name, key in (
            ("lanner_flusher_heartbeat_age_seconds", "heartbeat_s_ago"),
            ("lanner_flusher_last_landed_age_seconds", "last_landed_s_ago"),
        ):
            if consumer.get(key) is not None:
                gauges[name] = [("", {}, consumer[key])]
        if db is not None and up["database"]:
            try:
                parked = PostbackLogStore(db.connection()).count_parked()
                outbound = DeliveryStore(db.connection()).pending_count()
            except STORE_ERRORS:
                pass  # Gone since the ping: absent this time.
            else:
                gauges["lanner_postbacks_parked"] = [("", {}, parked)]
                gauges["lanner_outbound_postbacks_pending"] = [("", {}, outbound)]
        pending = self._queue_pending()
        if pending is not None:
            gauges["lanner_queue_tasks_pending"] = [("", {}, pending)]
        gauges["lanner_clicks_refused_total"] = [("", {}, refused)]
        gauges["lanner_node_info"] = [("", {"node": settings.node_id}, 1)]
        return gauges

    def _queue_pending(self) -> int | None:
        """Huey's pending tasks (its SQLite file, or Redis in cluster mode), None if it cannot be read."""
        if not (self.settings.redis_url or self.settings.queue_path.exists()):
            return None
        from workers.ops.status import queue_depth

        try:
            depth: dict[str, Any] = queue_depth(self.settings)
        except Exception as exc:  # A queue that cannot be read leaves its gauge out, never the page.
            logger.debug("/metrics: the queue cannot be read: %s", type(exc).__name__)
            return None
        return depth.get("pending_tasks")
