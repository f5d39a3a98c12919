"""A GET of a campaign URL, run in front of Falcon: the web workers' hot path (app.py load_worker_app).

PERF: Falcon's machinery around a click (its Request and Response, routing, middleware, the generic
answer assembly) was ~4 µs of a web worker's ~145 a click, and the click's 302 needs none of it. Here
the click runs the same ClickResource code on a stand-in request (its environ) and response (what the
handler set). The plain 302 (Cache-Control and Location, no body, no cookie: nearly every click) is
written here, with the headers Falcon gives it, in its order. Any other outcome (a cookie, a page, a
204, a raised 404 or 503, any exception) is handed to Falcon with what the handler did, and the
resource replays it onto Falcon's own Response (ClickResource.on_get): Falcon answers it as it would
have. Every other request (not a GET, an LP click, a path Falcon routes elsewhere, an admin path) goes
to Falcon untouched; which resource a path is Falcon's router's answer, asked once a path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import falcon
from falcon.routing import CompiledRouter

from routes.click import ANSWERED, ClickResource

MAX_CACHED_PATHS = 1024  # Paths a worker keeps Falcon's routing of; emptied when full.
_NOT_A_CLICK = ""  # A path Falcon routes elsewhere.


class ClickAnswer:
    """A stand-in for the Falcon Response of a click: what the handler set, in order."""

    __slots__ = ("_status", "headers", "steps", "is_plain", "error")

    def __init__(self) -> None:
        self._status: Any = falcon.HTTP_200
        self.headers: dict[str, str] = {}  # As Falcon keeps them: lowercased names, in order.
        self.steps: list[tuple[str, Any, Any]] = []  # (what, name or value, value): to replay.
        self.is_plain = True  # Only status and set_header so far.
        self.error: Exception | None = None  # Raised by the handler: raised again in Falcon.

    @property
    def status(self) -> Any:
        return self._status

    @status.setter
    def status(self, value: Any) -> None:
        self._status = value
        self.steps.append(("status", value, None))

    def set_header(self, name: str, value: str) -> None:
        self.headers[name.lower()] = str(value)
        self.steps.append(("set_header", name, value))

    def append_header(self, name: str, value: str) -> None:
        self.is_plain = False
        self.steps.append(("append_header", name, value))

    @property
    def content_type(self) -> Any:
        raise AttributeError("content_type is only set on a click's answer")

    @content_type.setter
    def content_type(self, value: str) -> None:
        self.is_plain = False
        self.steps.append(("content_type", value, None))

    @property
    def text(self) -> Any:
        raise AttributeError("text is only set on a click's answer")

    @text.setter
    def text(self, value: str) -> None:
        self.is_plain = False
        self.steps.append(("text", value, None))

    def replay(self, resp: falcon.Response) -> None:
        """Do to Falcon's Response what the handler did to this one, then raise what it raised."""
        for what, first, second in self.steps:
            if what in ("set_header", "append_header"):
                getattr(resp, what)(first, second)
            else:
                setattr(resp, what, first)
        if self.error is not None:
            raise self.error


class _ClickRequest:
    """A stand-in for the Falcon Request of a click: ClickResource's campaign URL reads its environ
    only (the LP click, which reads more, goes through Falcon)."""

    __slots__ = ("env",)

    def __init__(self, env: dict) -> None:
        self.env = env


class CampaignUrls:
    """WSGI, in front of the web workers' Falcon app: campaign URLs' clicks (see the module doc)."""

    def __init__(
        self,
        app: falcon.App,
        router: CompiledRouter,
        clicks: ClickResource,
        falcon_prefixes: tuple[str, ...],
    ) -> None:
        self.app = app
        self.router = router  # The app's: the same routes, asked the same way.
        self.clicks = clicks
        self.falcon_prefixes = falcon_prefixes  # Paths with middleware of their own (the admin's).
        media_type = app.resp_options.default_media_type
        # What Falcon adds to a body-less answer with no Content-Type of its own, in its order.
        self.tail = [("content-length", "0")] + ([("content-type", media_type)] if media_type else [])
        self._aliases: dict[str, str] = {}  # PATH_INFO -> the campaign alias, or _NOT_A_CLICK.

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "GET" or "_lp=" in environ.get("QUERY_STRING", ""):
            return self.app(environ, start_response)
        path = environ.get("PATH_INFO", "")
        alias = self._aliases.get(path)
        if alias is None:
            alias = self._route(path)
        if not alias:
            return self.app(environ, start_response)
        answer = ClickAnswer()
        try:
            self.clicks.on_get(_ClickRequest(environ), answer, alias)  # type: ignore[arg-type]
        except Exception as error:  # Answered by Falcon's error handlers, as before.
            answer.error = error
            answer.is_plain = False
        if not answer.is_plain or answer.status != falcon.HTTP_302:
            environ[ANSWERED] = answer
            return self.app(environ, start_response)
        start_response(falcon.HTTP_302, [*answer.headers.items(), *self.tail])
        return []

    def _route(self, path: str) -> str:
        """The campaign alias of `path` if Falcon routes it to the campaign URL as it is, else ""."""
        alias = _NOT_A_CLICK
        # Falcon strips a trailing slash and decodes a path that is not ASCII first: left to it.
        if path.startswith("/") and path.isascii() and not path.endswith("/"):
            if not path.startswith(self.falcon_prefixes):
                try:
                    found = self.router.find(path)
                except Exception:  # Falcon's own routing answers it (its error handlers included).
                    found = None
                if found is not None and found[0] is self.clicks and found[3] == "/{alias}":
                    alias = found[2]["alias"]
        if len(self._aliases) >= MAX_CACHED_PATHS:
            self._aliases.clear()
        self._aliases[path] = alias
        return alias
