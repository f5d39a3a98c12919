"""Local landers' files at `/landers/<folder>/...`, when no nginx is in front (`lanner run`, `make run`):
the same files, headers and caching as nginx's `location /landers/` (nginx/lanner-site.conf), which
answers them itself when it is there.

A local lander is served from the tracker's own origin, where the panel lives. Its files are the
buyer's, but often bought or downloaded from others, so they are treated as untrusted:
`Content-Security-Policy: sandbox ...` puts every page in an opaque origin (no `allow-same-origin`), so
a lander's script runs (most landers need it) but cannot read the panel's pages or the API with the
session cookie of the buyer looking at it, nor set cookies for the tracker; it may still submit forms,
open popups and navigate the top window (to the offer). `X-Content-Type-Options: nosniff` keeps a
browser from running a file as something its name does not say. Files are only ever read and sent:
nothing under DATA_DIR/landers is executed (no PHP).
"""

from __future__ import annotations

from pathlib import Path

import falcon
from falcon.routing import StaticRoute

from models.admin.lander_sandbox import SANDBOX

PREFIX = "/landers/"
# A folder is new on every upload (models/admin/landers.py), so what it holds never changes.
CACHE_CONTROL = "public, max-age=86400"
HEADERS = {
    "Content-Security-Policy": SANDBOX,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer-when-downgrade",
}


class LanderFilesSink:
    """A sink for `/landers/`: Falcon's static route (its traversal checks, ranges, ETag) with the
    sandbox headers, and a folder's index.html for the folder itself."""

    def __init__(self, directory: Path) -> None:
        self.static = StaticRoute(PREFIX, str(directory.resolve()))

    def __call__(self, req: falcon.Request, resp: falcon.Response, **kwargs) -> None:
        for name, value in HEADERS.items():
            resp.set_header(name, value)
        if req.method not in ("GET", "HEAD"):
            raise falcon.HTTPMethodNotAllowed(["GET", "HEAD"])
        rest = req.path[len(PREFIX) :]
        if rest and "/" not in rest:  # /landers/<folder>: its page (the trailing slash is stripped).
            req.path = req.path + "/index.html"
        self.static(req, resp)  # HTTPNotFound for what is not a file under the directory.
        resp.set_header("Cache-Control", CACHE_CONTROL)


def add_lander_routes(app: falcon.App, directory: Path) -> None:
    app.add_sink(LanderFilesSink(directory), PREFIX)
