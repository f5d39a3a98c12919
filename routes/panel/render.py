"""The panel's Jinja2 environment: templates from routes/panel/templates, autoescaped, and the number
filters every page formats with."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import falcon
import jinja2

logger = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
# No inline script runs: the pages load only the panel's own files, the chart's data is JSON in a
# <script type="application/json"> that nothing executes.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


def whole(value) -> str:
    """A count, with thousands separated: 12,345."""
    if value is None:
        return "–"
    return f"{round(value):,}"


def money(value, currency: str = "") -> str:
    """An amount rounded to cents, in the report currency: 1,234.50 USD."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:,.2f} {currency}".strip()


def percent(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:,.1f}%"


def create_environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # Every template, whatever its name: campaign names and sub ids are anybody's.
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(whole=whole, money=money, percent=percent)
    return environment


class Renderer:
    """Renders a template as the answer, with the headers every panel page carries."""

    def __init__(self) -> None:
        self.environment = create_environment()

    def __call__(self, resp: falcon.Response, template: str, code: int = 200, **context) -> None:
        resp.status = code
        resp.content_type = falcon.MEDIA_HTML
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Referrer-Policy", "same-origin")
        resp.text = self.environment.get_template(template).render(**context)


def serialize_errors_as_pages(render: Renderer, prefix: str, default, sessions=None):
    """A Falcon error serializer: the panel's errors (403, 404, 429 ...) as a page, every other path's
    as `default` does (the APIs' JSON). A logged-in user's page has the nav and the log-out button, so
    a buyer who hits a 404 goes on from there."""

    def serialize(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError) -> None:
        if req.path != prefix and not req.path.startswith(prefix + "/"):
            default(req, resp, error)
            return
        session = error_session(req, sessions)
        render(
            resp,
            "error.html",
            error.status_code,
            session=session,
            path=req.path,
            user=session.principal if session is not None else None,
            title=error.title or "Error",
            description=error.description or "",
        )

    return serialize


def error_session(req: falcon.Request, sessions):
    """The session an error page is shown in: the one the request already looked up (None included: a
    missing or expired one stays missing), else looked up now (a 404 of a path no page routes). An error
    while looking it up, such as a database that will not answer, is an error page without a user, never
    a second error."""
    if "session" in req.context:
        return req.context.session
    if sessions is None:
        return None
    try:
        return sessions.current(req)
    except Exception:  # noqa: BLE001 - the error being shown is the one that matters.
        logger.warning("An error page's session could not be looked up", exc_info=True)
        return None
