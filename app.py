"""The WSGI application: `create_app(settings, **deps)` only wires resources to their collaborators."""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import falcon
from falcon.routing import CompiledRouter

from settings import Settings
from workers.runtime.logs import configure_logging

if TYPE_CHECKING:
    from peewee import Database

    from routes.click import ClickResource
    from workers.runtime.server import LoadedApp

# The admin routes' paths, whose query strings must be UTF-8 (routes/inputs.py StrictQuery); campaign
# URLs, the Click API and postbacks decide for themselves.
ADMIN_PREFIXES = ("/api/", "/panel")


def create_app(
    settings: Settings,
    *,
    tracker=None,
    enqueue_delivery=None,
    recorder=None,
    counts: memoryview | None = None,
) -> falcon.App:
    """The web workers' Falcon app (a worker serves it behind create_worker_app). `counts`: the worker's
    metrics slot (models/ops/metrics.py), else its own."""
    return _web_app(settings, tracker, enqueue_delivery, recorder, counts)[0]


def create_worker_app(
    settings: Settings, *, tracker=None, counts: memoryview | None = None
) -> Callable[..., Any]:
    """The web workers' app as a worker serves it: campaign URLs' clicks in front of Falcon
    (routes/campaignurls.py), every other request through it."""
    from routes.campaignurls import CampaignUrls

    app, router, clicks, falcon_prefixes = _web_app(settings, tracker, None, None, counts)
    return CampaignUrls(app, router, clicks, falcon_prefixes)


def _web_app(
    settings: Settings,
    tracker,
    enqueue_delivery,
    recorder,
    counts: memoryview | None,
) -> tuple[falcon.App, CompiledRouter, ClickResource, tuple[str, ...]]:
    """(the web workers' Falcon app, its router, its campaign URL resource, the path prefixes its
    middleware looks at)."""
    from models.conversions.postbacks import ConversionRecorder
    from models.conversions.refusals import RefusalCounter
    from models.reporting.history import HistoryFiles
    from models.reporting.historyclicks import click_history
    from models.routing.macros import compile_url
    from routes.api import ExchangeRateApiResource, ReportApiResource
    from routes.click import ClickResource, ClientAddress
    from routes.clickapi import ClickApiResource, KClientOfferResource, LpVisitResource, ScriptResource
    from routes.errors import handle_unexpected
    from routes.health import HealthResource, LivezResource, ReadyzResource
    from routes.inputs import StrictQuery, install_media_handlers
    from routes.landers import add_lander_routes
    from routes.postback import (
        ClickPixelResource,
        ConversionPixelResource,
        PostbackDesk,
        PostbackResource,
    )
    from workers.runtime.heartbeat import ConsumerWatch
    from workers.runtime.spoolwatch import SpoolWatch

    fallback_url = ""
    if settings.fallback_url:
        # The same rules as an offer URL (raises MacroError), rewritten as printable ASCII.
        fallback_url = compile_url(settings.fallback_url).source
    if tracker is None:
        tracker = create_tracker(settings, counts=counts)
    client_address = ClientAddress(
        settings.trusted_proxies, settings.real_ip_header, is_unix_socket=settings.bind.startswith("unix:")
    )
    if enqueue_delivery is None:
        enqueue_delivery = delivery_queue(settings)
    if recorder is None:
        recorder = ConversionRecorder(
            tracker.db, park_ms=settings.postback_park_ms, history=click_history(settings)
        )
    desk = PostbackDesk(recorder, RefusalCounter(tracker.db), client_address, enqueue_delivery)
    clicks = ClickResource(
        tracker,
        client_address,
        settings.sub_id_aliases,
        fallback_url,
        settings.max_click_cost,
        settings.spool_full_answer,
        frozenset(settings.tracker_hosts),
    )
    router = CompiledRouter()
    app = falcon.App(media_type=falcon.MEDIA_JSON, router=router)
    app.req_options.strip_url_path_trailing_slash = True
    install_media_handlers(app)
    falcon_prefixes: tuple[str, ...] = ()
    spool = SpoolWatch(settings.spool_dir, settings.data_dir)
    # /healthz's look at the consumer needs no new file descriptor (near the open-file limit).
    consumer = ConsumerWatch(
        settings.data_dir,
        tracker.backlog_age,
        backlog_alert_seconds=settings.backlog_alert_seconds,
        outage_lag=spool.heartbeat_lag,  # While the database does not answer.
    )
    app.add_route("/healthz", HealthResource(tracker, consumer, spool))
    app.add_route("/livez", LivezResource())
    app.add_route("/readyz", ReadyzResource(tracker, spool))
    if not settings.admin_address:  # No admin worker: ours.
        from routes.metrics import MetricsResource
        from routes.panel import add_panel_routes
        from routes.v1 import add_v1_routes, v1_routes
        from workers.ops.metrics import MetricsSource

        app.add_route("/metrics", MetricsResource(MetricsSource(settings, tracker.db)))

        app.add_route(
            "/api/report",
            ReportApiResource(tracker.db, settings.report_currency, HistoryFiles.for_reports(settings)),
        )
        app.add_route("/api/currency/rates", ExchangeRateApiResource(tracker.db))
        add_v1_routes(app, v1_routes(tracker.db, settings))
        add_panel_routes(app, tracker.db, settings, build_tracker=build_tracker)
        # PERF: only here, where the web workers serve the admin routes too (a small install): with an
        # admin worker, campaign URLs run through no middleware at all.
        app.add_middleware(StrictQuery(ADMIN_PREFIXES))
        falcon_prefixes = ADMIN_PREFIXES
    app.add_route("/postback", PostbackResource(desk))
    # The key sits where a campaign alias would: Falcon wants one field name per path level.
    app.add_route("/{alias}/postback", PostbackResource(desk))
    app.add_route("/px/conversion", ConversionPixelResource(desk))
    app.add_route("/px/click/{alias}", ClickPixelResource(tracker, clicks.visit))
    app.add_route("/lp/click", clicks.lp_clicks)
    click_api = ClickApiResource(tracker, client_address, settings.sub_id_aliases, settings.max_click_cost)
    app.add_route("/click_api/v3", click_api)
    app.add_route("/api.php", click_api)  # Where KClient PHP is usually pointed (routes/clickapi.py).
    # `/`: KClient's getOffer() links, on to /lp/click; else a domain's parked campaign
    # (models/routing/domains.py).
    app.add_route("/", KClientOfferResource(root=clicks))
    app.add_route("/click_api", KClientOfferResource())
    app.add_route("/lp/visit", LpVisitResource(tracker, clicks.visit))
    app.add_route("/lanner.js", ScriptResource())
    app.add_route("/{alias}", clicks)
    add_lander_routes(app, settings.landers_dir)  # nginx serves them itself when it is in front.
    app.add_error_handler(Exception, handle_unexpected)
    return app, router, clicks, falcon_prefixes


def create_admin_app(
    settings: Settings,
    *,
    db: Database | None = None,
    find_principal=None,
    clock=None,
    conversion_csv_chunk: int | None = None,
) -> falcon.App:
    """The admin worker's app: the report API, the admin API (/api/v1) and the web panel (/panel), on its
    own connection (tests: theirs, their key lookup and their clock, a conversion CSV's chunk that a few
    rows cross); never campaign URLs."""
    from models.migrations.runner import require_current_schema
    from models.reporting.history import HistoryFiles
    from models.store.database import open_database
    from routes.api import ExchangeRateApiResource, ReportApiResource
    from routes.errors import handle_unexpected
    from routes.health import DatabaseHealthResource
    from routes.inputs import StrictQuery, install_media_handlers
    from routes.landers import add_lander_routes
    from routes.metrics import MetricsResource
    from routes.panel import add_panel_routes
    from routes.v1 import add_v1_routes, v1_routes
    from routes.v1.auth import principal_for
    from workers.ops.metrics import MetricsSource

    if db is None:
        db = open_database(settings.database_location)
    require_current_schema(db, settings.database_shown)
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=[ServerTiming()])
    app.add_middleware(StrictQuery(ADMIN_PREFIXES))
    app.req_options.strip_url_path_trailing_slash = True
    install_media_handlers(app)
    app.add_route("/healthz", DatabaseHealthResource(db))
    app.add_route("/metrics", MetricsResource(MetricsSource(settings, db)))
    app.add_route(
        "/api/report", ReportApiResource(db, settings.report_currency, HistoryFiles.for_reports(settings))
    )
    app.add_route("/api/currency/rates", ExchangeRateApiResource(db))
    add_v1_routes(app, v1_routes(db, settings, find_principal=find_principal or principal_for))
    add_panel_routes(
        app, db, settings, build_tracker=build_tracker, clock=clock, conversion_csv_chunk=conversion_csv_chunk
    )
    add_lander_routes(app, settings.landers_dir)  # The panel's preview, where no nginx is in front.
    app.add_error_handler(Exception, handle_unexpected)
    return app


class ServerTiming:
    """`Server-Timing: app;dur=MS, cpu;dur=MS` on every admin answer: the time from the request's
    arrival in the app to its rendered body, and the CPU time the worker spent on it (less than `app`
    when the idle-priority worker waited for a core). `lanner bench panel-pages` reads them: a client's
    own clock adds the queue and the network. The admin app's only: campaign URLs never carry it."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = (time.perf_counter(), time.thread_time())

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool
    ) -> None:
        started = getattr(req.context, "started", None)
        if started is not None:
            wall, cpu = time.perf_counter() - started[0], time.thread_time() - started[1]
            resp.set_header("Server-Timing", f"app;dur={wall * 1000:.2f}, cpu;dur={cpu * 1000:.2f}")


def create_outage_admin_app(settings: Settings) -> falcon.App:
    """The admin worker's app while its database cannot be reached at its start (cluster mode's
    PostgreSQL away): `/metrics` still answers, with the database down (the outage is when it matters),
    and everything else 503 with one sentence. The worker drains itself once the database answers
    again, and the master starts one with the whole app (routes/metrics.py OutageAdmin)."""
    from routes.errors import handle_unexpected
    from routes.metrics import MetricsResource, OutageAdmin
    from workers.ops.metrics import MetricsSource

    outage = OutageAdmin(settings.database_location)
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=[outage])
    app.add_route("/metrics", MetricsResource(MetricsSource(settings, None)))
    app.add_sink(outage.unavailable, "/")
    app.add_error_handler(Exception, handle_unexpected)
    return app


def load_admin_app(settings: Settings) -> LoadedApp:
    """Called by the admin worker after fork (workers/runtime/server.py)."""
    from models.store.database import PostgresUnreachable
    from workers.runtime.server import LoadedApp

    configure_logging(settings)
    try:
        app = create_admin_app(settings)
    except PostgresUnreachable as exc:
        logging.getLogger(__name__).warning("admin worker: %s; only /metrics answers until it is back", exc)
        app = create_outage_admin_app(settings)
    return LoadedApp(app, max_body_bytes(settings, is_admin=True))


def max_body_bytes(settings: Settings, *, is_admin: bool = False) -> int:
    """The largest request body a route of the web app (`is_admin`: of the admin app) reads. Its worker
    answers a bigger one 413 before reading it (workers/runtime/server.py, LoadedApp), so a route that
    reads a bigger body must be counted here; each route keeps its own limit, at most this."""
    from routes.clickapi import MAX_QUERY
    from routes.postback import MAX_BODY

    largest = 0 if is_admin else max(MAX_BODY, MAX_QUERY)  # Postbacks; Click API forms.
    if is_admin or not settings.admin_address:  # No admin worker: the web app has the admin routes too.
        from routes.api import MAX_RATES_BYTES
        from routes.panel.conversions import MAX_UPLOAD_BYTES
        from routes.panel.landers import FORM_ROOM
        from routes.v1.spec import MAX_BODY_BYTES

        # The admin API's JSON and CSV, the panel's CSV import, a lander's zip with its form around it.
        admin = (MAX_RATES_BYTES, MAX_BODY_BYTES, MAX_UPLOAD_BYTES, settings.lander_max_bytes + FORM_ROOM)
        largest = max(largest, *admin)
    return largest


def delivery_queue(settings: Settings):
    """Queue an outbound postback's Huey task; a lost one is picked up by the periodic sweep.

    PERF: Huey and the task modules are loaded at the first delivery, not at the worker's start:
    ~2 MB per web worker that an install with no outbound postbacks never needs.
    """
    logger = logging.getLogger(__name__)

    @functools.cache
    def queue():
        from workers.runtime.tasks import create_huey

        return create_huey(settings)

    def enqueue(delivery_id: int) -> None:
        try:
            queue().send_postback(delivery_id)
        except Exception:  # The delivery row is stored; `send_due_postbacks` sends it within a minute.
            logger.warning("could not queue outbound postback %s", delivery_id, exc_info=True)

    return enqueue


def create_tracker(settings: Settings, *, counts: memoryview | None = None):
    """Open this process's database connection and the click pipeline; refuse an old schema."""
    from models.migrations.runner import require_current_schema
    from models.store.database import open_database

    db = open_database(settings.database_location)
    require_current_schema(db, settings.database_shown)
    return build_tracker(db, settings, counts=counts)


def build_tracker(
    db: Database,
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    counts: memoryview | None = None,
):
    """The click pipeline a web worker runs, over an open database (tests: theirs, with their clock)."""
    from models.clicks.tracker import ClickTracker
    from models.lookups.bots import BotDetector
    from models.lookups.crawlerranges import CrawlerRanges
    from models.lookups.geo import GeoSource
    from models.lookups.useragent import UserAgentParser

    geo = GeoSource(settings.geo_path, settings.geo_network_paths)
    if geo.database is None:
        logging.getLogger(__name__).warning(
            "No geo database at %s: countries are unknown until it appears (`lanner geo build`).",
            settings.geo_path,
        )
    shared = landed = None
    if settings.redis_url:  # Cluster mode: only then is redis imported (models/cluster/).
        from models.cluster.shared_state import SharedState
        from workers.ops.clusterstatus import masked, redis_secret
        from workers.runtime.redisview import WorkerView

        secret = redis_secret(settings.redis_url)
        shared = SharedState(
            settings.redis_url,
            prefix=settings.redis_prefix,
            timeout=settings.redis_timeout,
            # For `lanner status`.
            on_change=WorkerView(settings.data_dir, lambda text: masked(text, secret)),
        )
        from models.store.nodevisitors import LandedVisitors, landed_visitors_path

        # The node's own visitor history, written by its flusher: no PostgreSQL probe per click.
        landed = LandedVisitors(landed_visitors_path(settings.spool_dir))
    return ClickTracker(
        db,
        spool_dir=settings.spool_dir,
        segment_bytes=settings.spool_segment_bytes,
        uniqueness_hours=settings.uniqueness_hours,
        debounce_seconds=settings.debounce_seconds,
        backlog_alert_seconds=settings.backlog_alert_seconds,
        geo=geo,
        devices=UserAgentParser(),
        bots=BotDetector(
            settings.bot_ips,
            crawler_ranges=CrawlerRanges(settings.bot_ranges_path) if settings.bot_ranges_path else None,
        ),
        anonymize_ip=settings.anonymize_ip,
        clock=clock,
        shared=shared,
        counts=counts,
        landed=landed,
    )


def load_worker_app(settings: Settings) -> LoadedApp:
    """Called by each bjoern worker after fork (workers/runtime/server.py)."""
    from models.ops.metrics import CounterSlot
    from routes.metrics import RequestMeter
    from workers.runtime.server import LoadedApp

    configure_logging(settings)
    slot = CounterSlot(settings.data_dir)  # After fork: the worker's own, for as long as it runs.
    tracker = create_tracker(settings, counts=slot.counts)
    loaded = LoadedApp(
        RequestMeter(create_worker_app(settings, tracker=tracker, counts=slot.counts), slot.counts),
        max_body_bytes(settings),
        on_exit=tracker.stop,  # A clean stop gives cluster mode's cap leases back.
    )
    # PERF: the code and config loaded so far live as long as the worker; keep the collector off
    # them, and collect the young generation less often (full collections showed up in profiles).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    return loaded
