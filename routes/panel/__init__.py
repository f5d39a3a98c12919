"""The web panel, `/panel/…`: server-rendered pages for people, served by the admin worker (README,
"Web panel"); routes/panel/static holds its vendored libraries and its own script and styles."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import falcon

if TYPE_CHECKING:
    from peewee import Database

    from models.clicks.tracker import ClickTracker
    from settings import Settings

PREFIX = "/panel"


def add_panel_routes(
    app: falcon.App,
    db: Database,
    settings: Settings,
    *,
    build_tracker: Callable[[Database, Settings], ClickTracker],
    clock=None,
    conversion_csv_chunk: int | None = None,
) -> None:
    """Route the panel's pages and static files on `app` (tests: `clock` moves the sessions' time,
    `conversion_csv_chunk` replaces the conversion CSV's CSV_CHUNK).

    `build_tracker(db, settings)` builds the click pipeline the simulate page runs (app.py's: the app
    wires it in, routes never import the app)."""
    from falcon.app_helpers import default_serialize_error

    from models.reporting.history import HistoryFiles
    from routes.click import ClientAddress
    from routes.panel import (
        alerts,
        bulk,
        bulkedit,
        columnsets,
        conversions,
        costpaste,
        costs,
        dashboard,
        domains,
        editor,
        labels,
        landers,
        logs,
        networks,
        offers,
        pages,
        people,
        platforms,
        postbacks,
        rates,
        reports,
        rules,
        simulate,
        sources,
        spend,
        system,
    )
    from routes.panel.common import PanelContext, PanelReports
    from routes.panel.render import STATIC, Renderer, serialize_errors_as_pages
    from routes.panel.session import PanelSessions

    bind = settings.admin_address or settings.bind  # The admin worker's, or the web workers' (`off`).
    client_address = ClientAddress(
        settings.trusted_proxies, settings.real_ip_header, is_unix_socket=bind.startswith("unix:")
    )
    sessions = PanelSessions(db, client_address, settings.panel_session_hours, clock=clock)
    render = Renderer()
    panel_reports = PanelReports(db, settings.report_currency, HistoryFiles.for_reports(settings))
    panel = PanelContext(db, settings, sessions, render, panel_reports, build_tracker, conversion_csv_chunk)
    # One module per area of the panel, each adding its own pages.
    for module in (
        pages,
        dashboard,
        editor,
        costs,
        costpaste,
        bulk,
        bulkedit,
        offers,
        rates,
        landers,
        sources,
        networks,
        domains,
        postbacks,
        platforms,
        spend,
        simulate,
        reports,
        columnsets,
        labels,
        rules,
        alerts,
        logs,
        conversions,
        people,
        system,
    ):
        module.add_routes(app, panel)
    app.add_static_route(PREFIX + "/static", STATIC)
    app.set_error_serializer(serialize_errors_as_pages(render, PREFIX, default_serialize_error, sessions))
