"""The panel's edge rules: the session cookie, HTTPS behind a trusted proxy, CSRF and same-origin checks.

The cookie is HttpOnly (no script reads it), SameSite=Lax (no cross-site POST carries it), Path=/,
and Secure when the request came over HTTPS: directly, or as a trusted proxy's X-Forwarded-Proto
says (the same peers routes/click.py believes for the visitor's IP). Every write (POST, PUT, PATCH,
DELETE) needs the session's CSRF token in its `csrf_token` form field, and an Origin (else Referer)
header, when sent, naming this host.
"""

from __future__ import annotations

import secrets
import urllib.parse
from datetime import UTC, datetime

import falcon

from models.accounts.sessions import Session, find_session
from routes.click import ClientAddress

COOKIE = "lanner_session"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOGIN_PATH = "/panel/login"
COOKIE_CLEARED = datetime(1970, 1, 1, tzinfo=UTC)


class PanelSessions:
    """Finds the request's session (`req.context.session`), sets and clears the cookie, and refuses
    cross-site or tokenless writes."""

    def __init__(self, db, client_address: ClientAddress, session_hours: float, *, clock=None) -> None:
        self.db = db
        self.client_address = client_address
        self.session_hours = session_hours
        self.clock = clock

    def clock_options(self) -> dict:
        """The keyword arguments that give the session and login services the test's clock, if any."""
        return {} if self.clock is None else {"clock": self.clock}

    def client_ip(self, req: falcon.Request) -> str:
        return self.client_address(req.env)

    def is_https(self, req: falcon.Request) -> bool:
        if req.scheme == "https":
            return True
        peer = req.env.get("REMOTE_ADDR", "")
        if self.client_address.is_unix_socket or peer in self.client_address.trusted:
            return (req.get_header("X-Forwarded-Proto") or "").strip().lower() == "https"
        return False

    def current(self, req: falcon.Request) -> Session | None:
        if "session" not in req.context:
            found = None
            # A few at most: each is a read, and a browser sends one (two while a path-scoped old one
            # lingers).
            for session_id in (req.get_cookie_values(COOKIE) or ())[:3]:
                found = find_session(self.db, session_id, self.session_hours, **self.clock_options())
                if found is not None:
                    break
            req.context.session = found
        return req.context.session

    def require(self, req: falcon.Request) -> Session:
        """The session; a GET without one is sent to the login page, a write refused."""
        session = self.current(req)
        if session is None:
            if req.method in WRITE_METHODS:
                raise falcon.HTTPForbidden(title="Not logged in", description="Log in again, then retry.")
            target = req.relative_uri if req.method == "GET" else "/panel"
            raise falcon.HTTPSeeOther(LOGIN_PATH + "?" + urllib.parse.urlencode({"next": target}))
        return session

    def check_same_origin(self, req: falcon.Request) -> None:
        """403 for a write whose Origin (or, without one, Referer) names another host than Host does.

        Hosts only, not ports: nginx passes `Host $host`, which drops the port the browser used."""
        sent = req.get_header("Origin") or req.referer
        if sent is not None and (urllib.parse.urlsplit(sent).hostname or "") != req.host.lower():
            raise falcon.HTTPForbidden(
                title="Cross-site request",
                description="This form was sent from another site; reload the page.",
            )

    def check_write(self, req: falcon.Request, session: Session, form: dict) -> None:
        """403 for a write without this session's CSRF token or from another origin."""
        self.check_same_origin(req)
        token = form.get("csrf_token")
        if not isinstance(token, str) or not secrets.compare_digest(
            token.encode(), session.csrf_token.encode()
        ):
            raise falcon.HTTPForbidden(
                title="Form expired",
                description="The form's security token is missing or old; reload the page.",
            )

    def set_cookie(self, req: falcon.Request, resp: falcon.Response, session: Session) -> None:
        resp.set_cookie(
            COOKIE,
            session.id,
            max_age=None,  # Until the browser closes; the server's sliding expiry ends it sooner.
            path="/",
            secure=self.is_https(req),
            http_only=True,
            same_site="Lax",
        )

    def clear_cookie(self, req: falcon.Request, resp: falcon.Response) -> None:
        # An Expires in 1970, not Falcon's unset_cookie (one second before the server's now): a browser
        # whose clock is behind the server's would keep that cookie until its clock got there.
        resp.set_cookie(
            COOKIE,
            "",
            expires=COOKIE_CLEARED,
            path="/",
            secure=self.is_https(req),
            http_only=True,
            same_site="Lax",
        )


def read_form(req: falcon.Request) -> dict:
    """The urlencoded form body as {name: value} (a repeated field: its first value)."""
    if (req.content_type or "").split(";")[0].strip() != falcon.MEDIA_URLENCODED:
        raise falcon.HTTPUnsupportedMediaType(
            description="Send the form as application/x-www-form-urlencoded."
        )
    form = req.get_media(default_when_empty={}) or {}
    return {name: value[0] if isinstance(value, list) else value for name, value in form.items()}


def read_form_lists(req: falcon.Request) -> dict[str, list[str]]:
    """The urlencoded form body as {name: [values]}, every value of a repeated field in order (the
    editor's filter rows); read_form's first values are the same body's."""
    if (req.content_type or "").split(";")[0].strip() != falcon.MEDIA_URLENCODED:
        raise falcon.HTTPUnsupportedMediaType(
            description="Send the form as application/x-www-form-urlencoded."
        )
    form = req.get_media(default_when_empty={}) or {}
    return {name: value if isinstance(value, list) else [value] for name, value in form.items()}
