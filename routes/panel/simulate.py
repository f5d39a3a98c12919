"""Simulate a visitor (/panel/campaigns/{id}/simulate): the routing trace `lanner simulate` prints, for a
visitor described in a form (IP, User-Agent, referrer, language, query parameters such as sub ids).

The fragment is what the campaign editor loads with htmx (an HX-Request gets the fragment alone);
opened directly it is a page. It makes the call cli/clicks.py's simulate_command makes
(routes/simulation.py): the click pipeline with dry_run, which stores nothing; a GET, then, with no
CSRF token to carry.
"""

from __future__ import annotations

import logging
import urllib.parse

import falcon

from models.accounts.access import visible_campaign_ids
from models.admin.services import AdminError, get_campaign, list_offers, list_streams
from routes.panel.common import PanelContext, PanelResource
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions
from routes.simulation import NoActiveCampaign, simulate_url

logger = logging.getLogger(__name__)

DEFAULT_IP = "203.0.113.10"  # The CLI's default: a documentation address, so no country.
FIELDS = ("ip", "ua", "referrer", "language", "params")
MAX_FIELD = 4000  # A User-Agent or a query string past this is nobody's visitor.


class LazyTracker:
    """One click pipeline per admin worker, built at the first simulation.

    Measured in process: the first simulate request of a worker takes ~230 ms (imports, the UA and
    bot matchers compiled), later ones ~2.3 ms. Building another tracker then costs only ~2 ms on an
    empty spool, but it replays every unflushed journal line, which a flusher backlog makes long: so
    it is built once and kept. It is never closed: the admin worker ends with os._exit
    (workers/runtime/server.py has no shutdown hook) and a dry run writes nothing that needs
    flushing; its files close with the process, as a web worker's do. It reads the same journal as
    the web workers, so a simulated visitor who clicked a moment ago is seen as a repeat, as the CLI's is.
    """

    def __init__(self, db, settings, build) -> None:
        self.db, self.settings, self.build = db, settings, build
        self.tracker = None

    def __call__(self):
        if self.tracker is None:
            self.tracker = self.build(self.db, self.settings)
        return self.tracker


class SimulateResource(PanelResource):
    def __init__(self, sessions: PanelSessions, render: Renderer, settings, tracker: LazyTracker) -> None:
        super().__init__(sessions, render)
        self.settings = settings
        self.tracker = tracker

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        visible = visible_campaign_ids(self.sessions.db, session.principal)
        try:
            campaign = get_campaign(self.sessions.db, campaign_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
        if visible is not None and campaign.id not in visible:
            raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_id}.")
        form = {name: (req.get_param(name) or "").strip()[:MAX_FIELD] for name in FIELDS}
        form["ip"] = form["ip"] or DEFAULT_IP
        is_fragment = req.get_header("HX-Request") == "true"
        data, message = None, ""
        if req.get_param("run"):
            data, message = self.simulate(campaign, form)
        names = {
            "streams": {stream.id: stream.name for stream in list_streams(self.sessions.db, campaign.id)},
            "offers": {offer.id: offer.name for offer in list_offers(self.sessions.db)},
        }
        context = dict(campaign=campaign, form=form, data=data, message=message, names=names)
        # htmx swaps only 2xx answers: a refused form comes back as a 200 fragment with its message.
        code = 400 if message and not is_fragment else 200
        self.page(req, resp, "_simulate.html" if is_fragment else "simulate.html", session, code, **context)

    def simulate(self, campaign, form: dict[str, str]) -> tuple[dict | None, str]:
        """(the trace, '') or (None, why there is none)."""
        params = form["params"].lstrip("?")
        try:
            urllib.parse.parse_qsl(params, strict_parsing=bool(params))
        except ValueError:
            return None, "The query parameters must look like sub_id_1=zone7&keyword=shoes."
        try:
            data = simulate_url(
                self.tracker(),
                f"/{campaign.alias}?{params}",
                ip=form["ip"],
                user_agent=form["ua"],
                referrer=form["referrer"],
                language=form["language"],
                sub_id_aliases=self.settings.sub_id_aliases,
                max_click_cost=self.settings.max_click_cost,
            )
        except NoActiveCampaign:
            return (
                None,
                f"Campaign {campaign.alias} is {campaign.status}: only an active campaign routes clicks.",
            )
        except ValueError as exc:
            return None, str(exc)
        return data, ""


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    tracker = LazyTracker(panel.db, panel.settings, panel.build_tracker)
    app.add_route(
        "/panel/campaigns/{campaign_id:int(min=1)}/simulate",
        SimulateResource(panel.sessions, panel.render, panel.settings, tracker),
    )
