"""Conversions in: `GET|POST /postback` (and `/<key>/postback`), the conversion pixel, the click pixel.

A postback is authenticated by the install's postback key (constant-time comparison), parsed at
the edge, and applied by models/postbacks.py in one transaction with its log row. A duplicate or a
refused status change answers 200 (the network must stop retrying; the log says why); a wrong key
403, a malformed postback 400, a database busy beyond its timeout 503 (the network retries later).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sqlite3
from typing import Callable

import falcon
import peewee
from falcon.uri import parse_query_string

from models.clickrefusals import SpoolUnwritable
from models.postbacks import (
    FAILED,
    FORBIDDEN,
    INVALID,
    ConversionRecorder,
    PostbackError,
    Received,
    keys_match,
    parse_postback,
    read_secret,
)
from models.tracking import ClickTracker
from routes.click import SPOOL_FULL_RETRY_AFTER, ClientAddress, VisitParser, is_prefetch

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
MAX_PARAMS = 100
SUBID_COOKIE = "lanner_subid"
SUBID_COOKIE_SECONDS = 30 * 86400
PIXEL_GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
_KEY_PARAM = re.compile(r"(^|&)key=[^&]*")


def _params(text: str) -> dict[str, str]:
    """Query-string style parameters, first value of each, bounded in number."""
    params = {}
    for name, value in parse_query_string(text, keep_blank=True, csv=False).items():
        if len(params) >= MAX_PARAMS:
            break
        params[name[:100]] = value[0] if isinstance(value, list) else value
    return params


def _body_params(req: falcon.Request) -> tuple[dict[str, str], str]:
    """A POST body's parameters (form or JSON object) and its text for the log."""
    if req.method != "POST" or not req.content_length:
        return {}, ""
    raw = req.bounded_stream.read(MAX_BODY)
    text = raw.decode("utf-8", "replace")
    content_type = (req.content_type or "").split(";")[0].strip().lower()
    if content_type == "application/json":
        try:
            data = json.loads(text)
        except ValueError:
            raise PostbackError("The JSON body is not valid JSON.") from None
        if not isinstance(data, dict):
            raise PostbackError("The JSON body must be an object of parameters.")
        return {str(k)[:100]: "" if v is None else str(v) for k, v in list(data.items())[:MAX_PARAMS]}, text
    return _params(text), text


class PostbackDesk:
    """What the postback and pixel resources share: key check, parsing, recording, outbound queueing."""

    def __init__(
        self,
        recorder: ConversionRecorder,
        client_address: ClientAddress,
        enqueue_delivery: Callable[[int], None],
    ) -> None:
        self.recorder = recorder
        self.client_address = client_address
        self.enqueue_delivery = enqueue_delivery

    def handle(self, req: falcon.Request, path_key: str | None, fallback_subid: str = "") -> tuple[str, dict]:
        """(HTTP status, answer) for one postback; never raises for the network's mistakes."""
        query = req.env.get("QUERY_STRING", "")
        params = _params(query)
        shown_path = "/…/postback" if path_key is not None else req.path
        received = Received(req.method, self.client_address(req.env), f"{req.method} {shown_path}")
        if query:
            received.request += "?" + _KEY_PARAM.sub(r"\1key=…", query)
        if fallback_subid:
            params.setdefault("subid", fallback_subid)
        try:
            body, body_text = _body_params(req)
        except PostbackError as exc:  # An unreadable body: the key is not known to be right; not logged.
            return _refusal(falcon.HTTP_400, INVALID, str(exc))
        if body_text:
            received.request += " " + body_text
        params.update(body)
        try:
            return self._process(
                received, params, path_key if path_key is not None else params.get("key", "")
            )
        except (peewee.OperationalError, sqlite3.OperationalError) as exc:
            logger.warning("postback not recorded, database busy: %s", exc)
            return _refusal(falcon.HTTP_503, FAILED, "The tracker is busy; retry later.")

    def _process(self, received: Received, params: dict[str, str], given_key: str) -> tuple[str, dict]:
        if not keys_match(given_key, read_secret(self.recorder.db, "postback_key")):
            detail = "The postback key is wrong."
            self.recorder.log_rejected(received, FORBIDDEN, detail, params.get("subid", ""))
            logger.warning("postback with a wrong key from %s", received.remote_ip)
            return _refusal(falcon.HTTP_403, FORBIDDEN, detail)
        try:
            postback = parse_postback(params)
        except PostbackError as exc:
            self.recorder.log_rejected(received, INVALID, str(exc), params.get("subid", ""))
            return _refusal(falcon.HTTP_400, INVALID, str(exc))
        outcome = self.recorder.record(postback, received)
        for delivery_id in outcome.deliveries:
            self.enqueue_delivery(delivery_id)
        return falcon.HTTP_200, {"status": "ok", **outcome.as_dict}


def _refusal(status: str, verdict: str, detail: str) -> tuple[str, dict]:
    return status, {"status": "error", "verdict": verdict, "detail": detail}


class PostbackResource:
    """`/postback?key=...&subid=...` and `/<key>/postback?subid=...`, GET or POST."""

    def __init__(self, desk: PostbackDesk) -> None:
        self.desk = desk

    def on_get(self, req: falcon.Request, resp: falcon.Response, alias: str | None = None) -> None:
        """`alias` is the key of `/<key>/postback` (the path level of a campaign alias)."""
        resp.set_header("Cache-Control", "no-store")
        resp.status, resp.media = self.desk.handle(req, alias)

    on_post = on_get


def _pixel(resp: falcon.Response, status: str) -> None:
    resp.status = status
    resp.content_type = "image/gif"
    resp.data = PIXEL_GIF
    resp.set_header("Cache-Control", "no-store")


class ConversionPixelResource:
    """`GET /px/conversion?key=...&subid=...`: a postback from the thank-you page, answered with a GIF.

    Without a subid parameter it uses the `lanner_subid` cookie the click pixel set.
    """

    def __init__(self, desk: PostbackDesk) -> None:
        self.desk = desk

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        status, answer = self.desk.handle(req, None, req.cookies.get(SUBID_COOKIE, ""))
        _pixel(resp, status)
        resp.set_header("X-Lanner-Verdict", answer["verdict"])


class ClickPixelResource:
    """`GET /px/click/<alias>`: a click from a lander the visitor reached without the tracker's redirect.

    The same pipeline as the campaign URL records the click; the answer is a GIF, the subid in the
    `lanner_subid` cookie (for the conversion pixel) and in `X-Lanner-Subid`.
    """

    def __init__(self, tracker: ClickTracker, visit: VisitParser) -> None:
        self.tracker = tracker
        self.visit = visit

    def on_get(self, req: falcon.Request, resp: falcon.Response, alias: str) -> None:
        campaign = self.tracker.campaign(alias)
        if campaign is None:
            _pixel(resp, falcon.HTTP_404)
            return
        if is_prefetch(req.env) and req.env.get("HTTP_SEC_FETCH_DEST") != "image":
            _pixel(resp, falcon.HTTP_204)
            return
        try:
            decision = self.tracker.track(campaign, self.visit(req.env))
        except SpoolUnwritable:  # Not recorded (a full disk): no subid cookie for a click not stored.
            _pixel(resp, falcon.HTTP_503)
            resp.set_header("Retry-After", str(SPOOL_FULL_RETRY_AFTER))
            return
        _pixel(resp, falcon.HTTP_200)
        resp.set_header("X-Lanner-Subid", decision.subid)
        resp.set_cookie(
            SUBID_COOKIE,
            decision.subid,
            max_age=SUBID_COOKIE_SECONDS,
            secure=False,
            same_site="Lax",
            path="/",
        )
