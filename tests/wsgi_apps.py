"""Tiny WSGI apps for testing the process manager (workers/runtime/server.py) without the Lanner app.

Every answer's body is the serving worker's pid, so tests can tell which process answered; `/body` answers
`PID PATH BYTES`: the request body's length as the app read it (`/body/close`: with `Connection: close`, as a
draining worker answers); `/big` pads the pid to BIG_BODY_BYTES, `/stream` sends it in two chunks.
"""

from __future__ import annotations

import os
import time
from urllib.parse import parse_qs

from workers.runtime.server import LoadedApp

MAX_BODY_BYTES = 64 * 1024  # bjoern refuses a larger request body before the app sees it
BIG_BODY_BYTES = 16 * 1024 * 1024


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    if path == "/slow":
        query = parse_qs(environ.get("QUERY_STRING", ""))
        time.sleep(float(query.get("seconds", ["0.2"])[0]))
    body = str(os.getpid()).encode()
    if path.startswith("/body"):
        body += f" {path} {len(environ['wsgi.input'].read())}".encode()
    if path == "/big":  # More than a socket takes in one write: bjoern writes the rest as it drains.
        body = body.ljust(BIG_BODY_BYTES, b".")
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (chunk for chunk in (body[:1], body[1:]))
    headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
    if path == "/body/close":
        headers.append(("Connection", "close"))
    start_response("200 OK", headers)
    return [body]


def hello_loader(settings):
    return LoadedApp(app, MAX_BODY_BYTES)


def broken_loader(settings):
    raise RuntimeError("this app cannot be loaded")


def fragile_loader(settings):
    """Fails while a file named `broken` exists in the data directory, like a deploy of bad code."""
    if (settings.data_dir / "broken").exists():
        raise RuntimeError("this app cannot be loaded")
    return LoadedApp(app, MAX_BODY_BYTES)
