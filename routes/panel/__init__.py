"""The web panel, `/panel/…`: server-rendered pages for people, served by the admin worker (README,
"Web panel"); routes/panel/static holds its vendored libraries and its own script and styles."""

from __future__ import annotations

from typing import TYPE_CHECKING

import falcon

if TYPE_CHECKING:
    from peewee import Database

    from settings import Settings

PREFIX = "/panel"


def add_panel_routes(app: falcon.App, db: Database, settings: Settings, *, clock=None) -> None:
    """Route the panel's pages and static files on `app` (tests: `clock` moves the sessions' time)."""
    from falcon.app_helpers import default_serialize_error

    from routes.click import ClientAddress
    from routes.panel import pages
    from routes.panel.render import STATIC, Renderer, serialize_errors_as_pages
    from routes.panel.session import PanelSessions

    bind = settings.admin_address or settings.bind  # The admin worker's, or the web workers' (`off`).
    client_address = ClientAddress(
        settings.trusted_proxies, settings.real_ip_header, is_unix_socket=bind.startswith("unix:")
    )
    sessions = PanelSessions(db, client_address, settings.panel_session_hours, clock=clock)
    render = Renderer()
    reports = pages.PanelReports(db, settings.report_currency)
    app.add_route(PREFIX, pages.DashboardResource(sessions, render, reports))
    app.add_route(PREFIX + "/login", pages.LoginResource(sessions, render))
    app.add_route(PREFIX + "/logout", pages.LogoutResource(sessions, render))
    app.add_route(PREFIX + "/campaigns", pages.CampaignListResource(sessions, render, reports, settings))
    app.add_route(
        PREFIX + "/campaigns/{campaign_id:int(min=1)}/status", pages.CampaignStatusResource(sessions, render)
    )
    app.add_static_route(PREFIX + "/static", STATIC)
    app.set_error_serializer(serialize_errors_as_pages(render, PREFIX, default_serialize_error))
