"""Conversions in: `GET|POST /postback` (and `/<key>/postback`), the conversion pixel, the click pixel.

A postback is authenticated by the install's postback key (constant-time comparison), parsed at
the edge, and applied by models/conversions/postbacks.py in one transaction with its log row. A duplicate or a
refused status change answers 200 (the network must stop retrying; the log says why); a wrong key
403, a malformed postback 400, a body over 64 KB 413, a database busy beyond its timeout 503 (the
network retries later). Nothing anonymous is logged row by row: a postback refused before its key
was right is only counted (models/conversions/refusals.py), and the key is masked in all that is kept.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable

import falcon
from falcon.uri import decode, parse_query_string

from models.clicks.refusals import SpoolUnwritable
from models.clicks.tracker import ClickTracker
from models.conversions.postbacks import (
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
from models.conversions.refusals import RefusalCounter
from models.store.database import STORE_ERRORS
from routes.click import SPOOL_FULL_RETRY_AFTER, ClientAddress, VisitParser, is_prefetch
from routes.inputs import Unreadable, is_text, is_utf8_encoded, load_json, utf8

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
MAX_JSON_DEPTH = 8  # Parameters are flat; a nested value is stored as text, deeper ones are refused.
MAX_PARAMS = 100
SUBID_COOKIE = "lanner_subid"
SUBID_COOKIE_SECONDS = 30 * 86400
PIXEL_GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
MASK = "…"
WRONG_KEY = "The postback key is wrong."
REFUSAL_WARNING_EVERY = 60.0  # Seconds: anonymous refusals must not grow the log line by line either.


class BodyTooLarge(PostbackError):
    """A body over MAX_BODY: 413, unread."""


def mask_key(text: str) -> str:
    """A query string or form body with every `key` parameter's value masked.

    Names are compared decoded, as Falcon reads them, so `%6Bey=` is masked too.
    """
    if "key" not in text and "%" not in text:
        return text
    parts = text.split("&")
    for i, part in enumerate(parts):
        name = part.partition("=")[0]
        if name == "key" or (("%" in name or "+" in name) and decode(name) == "key"):
            parts[i] = name + "=" + MASK
    return "&".join(parts)


def _params(text: str) -> dict[str, str]:
    """Query-string style parameters, first value of each, bounded in number."""
    params: dict[str, str] = {}
    for name, value in parse_query_string(text, keep_blank=True, csv=False).items():
        if len(params) >= MAX_PARAMS:
            break
        params[name[:100]] = value[0] if isinstance(value, list) else value
    return params


def _body_params(req: falcon.Request) -> tuple[dict[str, str], str]:
    """A POST body's parameters (form or JSON object) and its text for the log, the key masked.

    PostbackError (BodyTooLarge) for a body that cannot be read safely: over MAX_BODY, not
    UTF-8, nested deeper than MAX_JSON_DEPTH, a lone surrogate.
    """
    if req.method != "POST" or not req.content_length:
        return {}, ""
    if req.content_length > MAX_BODY:
        raise BodyTooLarge(f"The body is larger than {MAX_BODY // 1024} KB.")
    raw = req.bounded_stream.read(MAX_BODY)
    content_type = (req.content_type or "").split(";")[0].strip().lower()
    try:
        if content_type != "application/json":
            text = utf8(raw, "The body")
            if not is_utf8_encoded(raw):
                raise PostbackError("The body's parameters are not UTF-8.")
            return _params(text), mask_key(text)
        data = load_json(raw, "The JSON body", max_depth=MAX_JSON_DEPTH, is_nul_kept=True)  # As U+FFFD.
    except Unreadable as exc:
        raise PostbackError(str(exc)) from None
    if not isinstance(data, dict):
        raise PostbackError("The JSON body must be an object of parameters.")
    params = {str(k)[:100]: "" if v is None else str(v) for k, v in list(data.items())[:MAX_PARAMS]}
    # Logged as parsed, so the key is masked whatever escapes spelled its name.
    if "key" in data:
        data["key"] = MASK
    return params, json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class PostbackDesk:
    """What the postback and pixel resources share: key check, parsing, recording, outbound queueing.

    The key is checked before the body is read when it is in the path or the query. A postback
    refused before its key was right is only counted (models/conversions/refusals.py); the postback log holds
    postbacks that carried the key.
    """

    def __init__(
        self,
        recorder: ConversionRecorder,
        refusals: RefusalCounter,
        client_address: ClientAddress,
        enqueue_delivery: Callable[[int], None],
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recorder = recorder
        self.refusals = refusals
        self.client_address = client_address
        self.enqueue_delivery = enqueue_delivery
        self.monotonic = monotonic
        self.unwarned = 0
        self.warned_at = -REFUSAL_WARNING_EVERY

    def handle(self, req: falcon.Request, path_key: str | None, fallback_subid: str = "") -> tuple[str, dict]:
        """(HTTP status, answer) for one postback; never raises for the network's mistakes."""
        query = req.env.get("QUERY_STRING", "")
        params = _params(query)
        shown_path = "/…/postback" if path_key is not None else req.path
        received = Received(req.method, self.client_address(req.env), f"{req.method} {shown_path}")
        if query:
            received.request += "?" + mask_key(query)
        try:
            return self._handle(req, received, params, query, path_key, fallback_subid)
        except STORE_ERRORS as exc:
            logger.warning("postback not recorded, database busy: %s", exc)
            return _refusal(falcon.HTTP_503, FAILED, "The tracker is busy; retry later.")

    def _handle(
        self,
        req: falcon.Request,
        received: Received,
        params: dict[str, str],
        query: str,
        path_key: str | None,
        fallback_subid: str,
    ) -> tuple[str, dict]:
        given_key = path_key if path_key is not None else params.get("key")
        if given_key is not None and not self._is_key(given_key):
            return self._refuse(received, falcon.HTTP_403, FORBIDDEN, WRONG_KEY)
        try:
            body, body_text = _body_params(req)
        except PostbackError as exc:
            status = falcon.HTTP_413 if isinstance(exc, BodyTooLarge) else falcon.HTTP_400
            if given_key is None:  # The key was to be in the body: nothing says who sent it.
                return self._refuse(received, status, INVALID, str(exc))
            return self._reject(received, status, str(exc), params)
        if body_text:
            received.request += " " + body_text
        if given_key is None:
            given_key = body.get("key", "")
            if not self._is_key(given_key):
                return self._refuse(received, falcon.HTTP_403, FORBIDDEN, WRONG_KEY)
        if given_key:  # Anything else that holds the key (a network's misplaced macro) is masked too.
            received.request = received.request.replace(given_key, MASK)
        # WSGI strings are latin-1: the bytes as sent.
        if (not query.isascii() or "%" in query) and not is_utf8_encoded(query.encode("latin-1", "replace")):
            return self._reject(received, falcon.HTTP_400, "The query string is not UTF-8.", params)
        if fallback_subid:
            params.setdefault("subid", fallback_subid)
        params.update(body)
        try:
            postback = parse_postback(params)
        except PostbackError as exc:
            return self._reject(received, falcon.HTTP_400, str(exc), params)
        outcome = self.recorder.record(postback, received)
        for delivery_id in outcome.deliveries:
            self.enqueue_delivery(delivery_id)
        return falcon.HTTP_200, {"status": "ok", **outcome.as_dict}

    def _is_key(self, given: str) -> bool:
        return keys_match(given, read_secret(self.recorder.db, "postback_key"))

    def _reject(self, received: Received, status: str, detail: str, params: dict) -> tuple[str, dict]:
        """A malformed postback that carried the key: logged, so its network can see why."""
        subid = params.get("subid", "")
        self.recorder.log_rejected(received, INVALID, detail, subid if is_text(subid) else "")
        return _refusal(status, INVALID, detail)

    def _refuse(self, received: Received, status: str, verdict: str, detail: str) -> tuple[str, dict]:
        """Refused before the key was right: counted per source address, warned of once a minute."""
        self.refusals.count(received.remote_ip, f"{verdict}: {received.request}")
        self.unwarned += 1
        now = self.monotonic()
        if now - self.warned_at >= REFUSAL_WARNING_EVERY:
            logger.warning(
                "%d postbacks refused without the right key since the last warning, the last from %s "
                "(lanner postback refusals)",
                self.unwarned,
                received.remote_ip,
            )
            self.unwarned, self.warned_at = 0, now
        return _refusal(status, verdict, detail)


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
            decision = self.tracker.track(campaign, self.visit(req.env, campaign.source_slots))
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
