"""`GET /metrics` (the admin side: the admin worker, or the web workers when LANNER_ADMIN_BIND=off), and
the web workers' request meter that counts every answer and its latency into the worker's slot.

Access: no key. What it shows is counts, ages and states, no campaign, URL, address or error text
(workers/ops/metrics.py), and it is served only where the panel and the admin API are: the admin
worker's socket (a unix socket on one box, the node's private LANNER_ADMIN_BIND in cluster mode),
and through nginx only to the addresses of `lanner nginx site --admin-allow` (nginx/lanner-server.conf).
Prometheus scrapes each node's admin address: one node's numbers, never a balancer's mix.
"""

from __future__ import annotations

import os
import signal
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import falcon

from models.ops.metrics import (
    LATENCY_BOUNDS_NS,
    LATENCY_FIRST_BUCKET,
    LATENCY_SUM_US,
    STATUS_WORDS,
)
from workers.ops.metrics import CONTENT_TYPE, MetricsSource

RECONNECT_EVERY = 5.0  # Seconds between the outage admin app's tries of the database.


class OutageAdmin:
    """The admin app's stand-in while its database is away at the worker's start (app.py
    create_outage_admin_app): a middleware that tries the database at most every RECONNECT_EVERY
    seconds of requests, and once it answers has the worker drain (SIGTERM to itself, as the master
    would send), so the master replaces it with a worker that loads the whole app; and the sink that
    answers every other path 503."""

    def __init__(
        self,
        location: Path | str,
        *,
        clock: Callable[[], float] = time.monotonic,
        drain: Callable[[], None] | None = None,
    ) -> None:
        self.location = location
        self.clock = clock
        # As the master would: the drain thread ends the worker after this answer (workers/runtime/server.py).
        self.drain = drain or (lambda: os.kill(os.getpid(), signal.SIGTERM))
        self.next_try = 0.0
        self.is_back = False

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        if self.is_back or now < self.next_try:
            return
        self.next_try = now + RECONNECT_EVERY
        from models.store.database import PostgresUnreachable, connect

        try:
            connect(self.location).close()
        except PostgresUnreachable:
            return
        self.is_back = True
        self.drain()

    def unavailable(self, req: falcon.Request, resp: falcon.Response, **kwargs: Any) -> None:
        raise falcon.HTTPServiceUnavailable(
            title="Database unavailable",
            description="The admin worker cannot reach its database; try again shortly.",
            retry_after=5,
        )


class MetricsResource:
    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.cache_control = ("no-store",)
        resp.content_type = CONTENT_TYPE
        resp.text = self.source.render()


class RequestMeter:
    """WSGI middleware around a web worker's app: each answer's status class and the app's time.

    PERF: two clock reads, a closure, a bisect and three adds to the slot's mapped words per request
    (with a click's own two adds, 1.1 µs of CPU on the 2-core test box: 0.5 % of a click; the
    histogram's count is its buckets' sum, not a word of its own); no Falcon middleware (Falcon's hooks
    on every campaign URL cost more)."""

    def __init__(self, app: Callable[..., Iterable[bytes]], counts: memoryview) -> None:
        self.app = app
        self.counts = counts

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter_ns()
        counts = self.counts

        def metered(status: str, headers: list, exc_info: Any = None) -> Any:
            word = STATUS_WORDS.get(status[:1])
            if word is not None:
                counts[word] += 1
            return start_response(status, headers, exc_info)

        body = self.app(environ, metered)
        elapsed = time.perf_counter_ns() - started
        counts[LATENCY_FIRST_BUCKET + bisect_left(LATENCY_BOUNDS_NS, elapsed)] += 1
        counts[LATENCY_SUM_US] += elapsed // 1000
        return body
