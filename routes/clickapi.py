"""`/click_api/v3`: Keitaro's Click API v3, for a buyer's own server or lander that runs a campaign
server-side (KClient PHP and the like); `/lp/visit` and `/lanner.js`: the tracking script for remote
landers that ad traffic reaches directly, with no redirect through the tracker.

Every one of them records the click through the same pipeline as the campaign URL
(`ClickTracker.track`, models/clicks/tracker.py): debounce, uniqueness, caps and the journal alike.

Where the Click API's shapes come from (docs/click-api.md has the table and what is not supported):
- [docs]    https://docs.keitaro.io/en/development/click-api.html: the endpoint `/click_api/v3`, the
            request parameters (version, ip, user_agent, language, landing_id, uniqueness_cookie, log,
            info, force_redirect_offer) and the example answer (body, contentType, headers
            ["Location: ..."], info {campaign_id, stream_id, sub_id, type "location", url}, log
            ["Processing campaign 2", "IP: ...", "Checking stream #1282", ...], uniqueness_cookie). Its
            example call sends no ip and no user_agent, and its log shows the caller's: so do we.
- [wiki]    http://wiki.keitarotds.ru/en/click-api (Click API v3): an offer a stream chooses is not acted
            on unless force_redirect_offer=1 (only info.token comes back); cookies_ttl in hours; info's
            sub_id, campaign_id, stream_id, landing_id, offer_id (an array), token,
            uniqueness {campaign, stream, global}, is_bot.
- [kclient] KClickClient v3.1 (kclick_client.php, public copies on GitHub): sends token, version=3,
            info=1, ip, ua (not user_agent), language (two letters), referrer, se_referrer, keyword,
            uniqueness_cookie, force_redirect_offer, prefetch=1 and the page's own parameters; reads
            status (http_response_code), headers (sent as they are; "Location: ..." or
            "HTTP/1.1 404 Not Found" end the page), contentType, body, error (printed as the page),
            cookies {name: value} and uniqueness_cookie (stored for cookies_ttl hours), info.sub_id,
            info.token, info.is_bot, info.uniqueness.<level>. It is usually given the tracker's
            `/api.php` (Keitaro's older name for the Click API) and requests `//api.php?...` (it joins
            host and path with one slash too many): both are routed here, the double slash too.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import falcon

from models.clicks.decision import Decision
from models.clicks.refusals import SpoolUnwritable
from models.clicks.tracker import ClickTracker, Simulation
from models.routing.config import CampaignConfig
from models.routing.trace import trace_rows
from routes.click import (
    LOCATION_SAFE,
    MAX_REFERRER,
    MAX_USER_AGENT,
    MAX_VALUE,
    ClientAddress,
    VisitParser,
    canonical_ip,
    is_prefetch,
    redirect_page,
    spool_unwritable,
)
from routes.inputs import Unreadable, form_pairs, utf8, wsgi_text

MAX_QUERY = 16_384  # Bytes of a Click API call's query string or form body: nginx's header buffer.
MAX_FIELDS = 200  # Parameters in one call; the visit keeps 50 (routes/click.py MAX_PARAMS).
HTML = "text/html; charset=utf-8"
# The Click API's own parameters: never a visit's query parameter ([docs], [kclient]'s _excludeParams).
API_PARAMS = frozenset(
    {
        "token",
        "version",
        "info",
        "log",
        "ip",
        "user_agent",
        "ua",
        "language",
        "referrer",
        "se_referrer",
        "uniqueness_cookie",
        "force_redirect_offer",
        "x_requested_with",
        "landing_url",
        "landing_id",
        "prefetch",
        "api_key",
    }
)
# Lanner's answer -> Keitaro's info.type: "location" is [docs]' 302; the others are Keitaro's action names.
ANSWER_TYPES = {
    "http": "location",
    "meta": "meta",
    "js": "js",
    "html": "show_html",
    "blank": "do_nothing",
    "not_found": "status404",
}
SCRIPT_PATH = Path(__file__).with_name("static") / "lanner.js"
SCRIPT_MAX_AGE = 3600  # Seconds a browser or CDN may keep /lanner.js.
# /lp/visit's own parameters; the page's others are the visit's.
VISIT_PARAMS = frozenset({"campaign", "referrer"})


class ClickApiError(falcon.HTTPError):
    """A refused Click API call in Keitaro's shape, `{"error": "..."}`: KClient prints `error` ([kclient])."""

    def __init__(self, status: str, description: str) -> None:
        super().__init__(status, title="Click API", description=description)

    def to_dict(self, obj_type=dict):
        return obj_type(error=self.description)


def _utf8(raw: str, what: str) -> str:
    """A WSGI (latin-1) string as the UTF-8 text the client sent; ClickApiError 400 if it is not UTF-8."""
    try:
        return wsgi_text(raw, f"The {what}")
    except Unreadable as exc:
        raise ClickApiError(falcon.HTTP_400, str(exc)) from None


def _fields(text: str, what: str) -> dict[str, str]:
    """Form-encoded parameters (the first of a repeated name), refused with one sentence when unusable."""
    try:
        pairs = form_pairs(text, f"The {what}", MAX_FIELDS)
    except Unreadable as exc:
        raise ClickApiError(falcon.HTTP_400, str(exc)) from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


def call_params(req: falcon.Request) -> dict[str, str]:
    """A call's parameters: the query string's, then a POSTed form's ([kclient] GETs)."""
    raw = req.env.get("QUERY_STRING", "")
    if len(raw) > MAX_QUERY:
        raise ClickApiError(falcon.HTTP_414, f"The query string is longer than {MAX_QUERY:,} bytes.")
    params = _fields(_utf8(raw, "query string"), "query string")
    if req.method == "POST":
        if (req.content_length or 0) > MAX_QUERY:
            raise ClickApiError(falcon.HTTP_413, f"The form is longer than {MAX_QUERY:,} bytes.")
        body = req.bounded_stream.read(MAX_QUERY + 1)
        if len(body) > MAX_QUERY:
            raise ClickApiError(falcon.HTTP_413, f"The form is longer than {MAX_QUERY:,} bytes.")
        if body and (req.content_type or "").startswith("application/x-www-form-urlencoded"):
            try:
                text = utf8(body, "The form")
            except Unreadable as exc:
                raise ClickApiError(falcon.HTTP_400, str(exc)) from None
            for name, value in _fields(text, "form").items():
                params.setdefault(name, value)
    return params


def _wsgi(text: str, limit: int) -> str:
    """Text as a WSGI header value (UTF-8 bytes seen as latin-1), for VisitParser to read back."""
    return text[:limit].encode("utf-8").decode("latin-1")


def _flag(params: dict[str, str], name: str) -> bool:
    return params.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _visitor_ip(params: dict[str, str], req: falcon.Request, client_address: ClientAddress) -> str:
    """`ip`, or the caller's address when it sends none ([docs]' example); a forwarded list's first."""
    given = params.get("ip", "").split(",")[0].strip()
    if not given:
        return client_address(req.env)
    address = canonical_ip(given)
    if address is None:
        raise ClickApiError(falcon.HTTP_400, f"ip {given[:64]!r} is not an IPv4 or IPv6 address.")
    return address


def _location_header(location: str) -> str:
    """`Location: URL`, the URL printable ASCII as routes/click.py `answer` sends it."""
    if not location.isascii():
        location = quote(location, safe=LOCATION_SAFE)
    return f"Location: {location}"


def _lander_id(decision: Decision) -> int | None:
    """The lander the decision sends to, once streams have landers (read generically: None until then)."""
    return getattr(decision, "lander_id", None)


def api_answer(
    campaign: CampaignConfig,
    simulation: Simulation,
    *,
    is_forced: bool,
    wants_log: bool,
    wants_info: bool,
) -> dict[str, Any]:
    """The Click API's JSON for a recorded click ([docs], [wiki], [kclient])."""
    decision = simulation.decision
    kind, location = decision.answer, decision.location
    lander_id = _lander_id(decision)
    # [wiki]: v3 acts on a chosen offer only with force_redirect_offer=1; otherwise the lander (the
    # caller) shows itself and links to the offer with info.token (Lanner: /lp/click?subid=).
    is_held_offer = decision.offer_id is not None and lander_id is None and not is_forced
    headers: list[str] = []
    body: str | None = None
    status = 200
    if is_held_offer and kind in ("http", "meta", "js"):
        kind_type = "offer"
    else:
        kind_type = ANSWER_TYPES.get(kind, kind)
        if kind in ("meta", "js"):
            assert location is not None  # Every meta and js answer has one.
            body = redirect_page(location, kind)
        elif kind in ("html", "blank"):
            body = decision.body
        elif kind == "not_found":  # [kclient] ends the page on this header.
            status = 404
            headers.append("HTTP/1.1 404 Not Found")
        elif location:  # http, and any answer with a URL (a lander's): a 302.
            status = 302
            headers.append(_location_header(location))
        else:
            body = decision.body or None
    answer: dict[str, Any] = {
        "body": body,
        "contentType": HTML,
        "headers": headers,
        "status": status,
        "cookies": {},
        # Opaque to the caller, which stores it and sends it back ([kclient]); Lanner decides uniqueness
        # by the visitor's address and User-Agent, as for every click (docs/click-api.md).
        "uniqueness_cookie": decision.subid,
        "cookies_ttl": max(1, math.ceil(campaign.uniqueness_ms / 3_600_000)),
    }
    if wants_log:
        answer["log"] = decision_log(campaign, simulation, headers)
    if wants_info:
        answer["info"] = {
            "sub_id": decision.subid,
            "campaign_id": decision.campaign_id,
            "stream_id": decision.stream_id,
            "landing_id": lander_id,
            "offer_id": [decision.offer_id] if decision.offer_id is not None else [],
            "type": kind_type,
            "url": location,
            "is_bot": simulation.subject.is_bot,
            "uniqueness": {
                "campaign": decision.is_unique_campaign,
                "stream": decision.is_unique_stream,
                "global": decision.is_unique_global,
            },
            # KClient's getOffer() needs a landing token; the subid is Lanner's (docs/click-api.md).
            "token": decision.subid,
        }
    return answer


def decision_log(campaign: CampaignConfig, simulation: Simulation, headers: list[str]) -> list[str]:
    """The click's decision trace as [docs]' log lines: the trace `lanner simulate` prints
    (models/routing/trace.py), worded as Keitaro words it."""
    decision, subject = simulation.decision, simulation.subject
    bot = (
        f"yes ({simulation.bot_reason})"
        if subject.is_bot and simulation.bot_reason
        else ("yes" if subject.is_bot else "no")
    )
    lines = [
        f"Processing campaign {campaign.id}",
        f"Referrer: {subject.referrer}",
        f"Keyword: {subject.keyword}",
        f"IP: {subject.ip}",
        f"UserAgent: {subject.user_agent}",
        f"Language: {','.join(subject.languages)}",
        f"Country: {subject.country or 'unknown'}",
        f"Device: {subject.device_type or 'unknown'}, {subject.os or 'unknown'}, "
        f"{subject.browser or 'unknown'}",
        f"Is bot: {bot}",
    ]
    for row in trace_rows(simulation.trace):
        lines.append(f"Checking stream #{row['stream']} {row['name']}".rstrip())
        for check in row["filters"]:
            verdict = "allow" if check["passed"] else "rejected"
            lines.append(f'Filter "{check["filter"]}": {verdict} (saw {check["saw"]})')
        lines.append("Accepted by filters" if row["verdict"] == "matched" else f"Skipped: {row['verdict']}")
    if decision.is_repeat:
        lines.append("Repeat of a click moments ago (debounce): its subid again, no new click")
    if decision.stream_id is not None:
        lines.append(f"Stream #{decision.stream_id}")
    else:
        lines.append("No stream: the campaign's default")
    if decision.offer_id is not None:
        lines.append(f"Offer #{decision.offer_id}")
    lines.append(f"Is unique in campaign: {'yes' if decision.is_unique_campaign else 'no'}")
    lines.append(f"Subid: {decision.subid}")
    lines.extend(f"Send headers: {header}" for header in headers)
    return lines


class ClickApiResource:
    """`GET|POST /click_api/v3?token=...`: the campaign of the token runs for the visitor the parameters
    describe; the click is recorded like a campaign URL's, and the answer says what to send the visitor."""

    def __init__(
        self,
        tracker: ClickTracker,
        client_address: ClientAddress,
        sub_id_aliases: dict[str, int],
        max_click_cost: float,
    ) -> None:
        self.tracker = tracker
        self.client_address = client_address
        # The visit is described by parameters, not by this request: no proxy to trust.
        untrusting = ClientAddress((), "X-Real-IP", is_unix_socket=False)
        self.visit = VisitParser(untrusting, sub_id_aliases, max_click_cost)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        params = call_params(req)
        token = params.get("token", "").strip()
        if not token:
            raise ClickApiError(falcon.HTTP_400, "Send the campaign's token (token=...).")
        campaign = self.tracker.campaign_by_token(token[:MAX_VALUE])
        if campaign is None:
            raise ClickApiError(falcon.HTTP_404, "No active campaign has this token.")
        ip = _visitor_ip(params, req, self.client_address)
        if _flag(params, "prefetch"):
            # [kclient] says so for a browser's prefetch: nobody clicked yet, nothing is recorded.
            resp.media = {"body": None, "contentType": HTML, "headers": [], "status": 204, "cookies": {}}
            return
        user_agent = params.get("user_agent") or params.get("ua")
        if user_agent is None:  # The caller's own, as [docs]' example logs it.
            user_agent = req.env.get("HTTP_USER_AGENT", "")
        else:
            user_agent = _wsgi(user_agent, MAX_USER_AGENT)
        environ = {
            "REQUEST_METHOD": "GET",
            "REMOTE_ADDR": ip,
            "HTTP_USER_AGENT": user_agent,
            "HTTP_REFERER": _wsgi(params.get("referrer", ""), MAX_REFERRER),
            "HTTP_ACCEPT_LANGUAGE": _wsgi(params.get("language", ""), MAX_VALUE),
            "QUERY_STRING": urlencode({k: v for k, v in params.items() if k not in API_PARAMS}),
        }
        if not environ["HTTP_USER_AGENT"]:
            del environ["HTTP_USER_AGENT"]  # None at all: a bot, as on the campaign URL.
        visit = self.visit(environ, campaign.source_slots)
        try:
            simulation = self.tracker.track_traced(campaign, visit)
        except SpoolUnwritable:
            raise ClickApiError(
                falcon.HTTP_503, "The tracker cannot record clicks right now; try again shortly."
            ) from None
        resp.media = api_answer(
            campaign,
            simulation,
            is_forced=_flag(params, "force_redirect_offer"),
            wants_log=_flag(params, "log"),
            wants_info=_flag(params, "info"),
        )

    on_post = on_get


def _cors(req: falcon.Request, resp: falcon.Response) -> None:
    """Any page may ask, without credentials: the origin is echoed, never with Allow-Credentials."""
    origin = req.get_header("Origin")
    resp.set_header("Access-Control-Allow-Origin", origin or "*")
    resp.set_header("Vary", "Origin")


class LpVisitResource:
    """`GET /lp/visit?campaign=ALIAS&<the page's query>&referrer=...`: /lanner.js on a remote lander
    that ad traffic reached directly records the visit as the campaign's click (address and User-Agent
    from this request, the page's parameters as the campaign URL's) and gets its subid."""

    def __init__(self, tracker: ClickTracker, visit: VisitParser) -> None:
        self.tracker = tracker
        self.visit = visit  # The campaign URL's parser (routes/click.py): trusted proxies alike.

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        _cors(req, resp)
        resp.set_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        resp.set_header("Access-Control-Allow-Headers", "Content-Type")
        resp.set_header("Access-Control-Max-Age", "86400")
        resp.status = falcon.HTTP_204

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _cors(req, resp)
        resp.set_header("Cache-Control", "no-store")
        raw = req.env.get("QUERY_STRING", "")
        if len(raw) > MAX_QUERY:
            raise falcon.HTTPUriTooLong(description=f"The query string is longer than {MAX_QUERY:,} bytes.")
        try:
            params = _fields(_utf8(raw, "query string"), "query string")
        except ClickApiError as exc:
            raise falcon.HTTPBadRequest(title="Bad visit", description=exc.description) from None
        alias = params.get("campaign", "")
        campaign = self.tracker.campaign(alias) if alias else None
        if campaign is None:
            raise falcon.HTTPNotFound(
                title="Unknown campaign", description="No active campaign has this alias."
            )
        if is_prefetch(req.env):
            resp.status = falcon.HTTP_204  # A prerendered page asks again once shown (lanner.js waits).
            return
        environ = dict(req.env)
        environ["QUERY_STRING"] = urlencode({k: v for k, v in params.items() if k not in VISIT_PARAMS})
        # The lander's own URL is this request's Referer: the visit's referrer is the page's.
        environ["HTTP_REFERER"] = _wsgi(params.get("referrer", ""), MAX_REFERRER)
        try:
            decision = self.tracker.track(campaign, self.visit(environ, campaign.source_slots))
        except SpoolUnwritable:
            raise spool_unwritable() from None
        resp.media = {
            "subid": decision.subid,
            "offer_url": decision.location if decision.offer_id is not None else None,
            # How long lanner.js may answer a reload of the page with this subid: the uniqueness window.
            "ttl": int(campaign.uniqueness_ms / 1000),
        }


class KClientOfferResource:
    """`GET /?_lp=1&_token=SUBID` (and `/click_api/?...`): where KClient's getOffer() links a lander's
    offer button ([kclient] _buildOfferUrl: the tracker URL's folder); sent on to the lander click,
    `/lp/click?subid=`, which records it and redirects to the offer. `info.token` is the subid."""

    def __init__(self, root=None) -> None:
        self.root = root  # At `/`: the click resource, for a domain's parked campaign (routes/click.py).

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        token = req.get_param("_token") or ""
        if req.get_param("_lp") == "1" and token:
            resp.status = falcon.HTTP_302
            resp.set_header("Location", "/lp/click?" + urlencode({"subid": token[:MAX_VALUE]}))
        elif self.root is not None:
            self.root.on_get_root(req, resp)
        else:
            raise falcon.HTTPNotFound(title="Not found", description="Nothing is served here.")

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.root is None:
            raise falcon.HTTPNotFound(title="Not found", description="Nothing is served here.")
        self.root.on_head_root(req, resp)


class ScriptResource:
    """`GET /lanner.js`: the tracking script (routes/static/lanner.js), small and cacheable."""

    def __init__(self, path: Path = SCRIPT_PATH) -> None:
        self.path = path
        self._script: tuple[bytes, str] | None = None

    def _load(self) -> tuple[bytes, str]:
        if self._script is None:  # At the first request, not at import or wiring.
            data = self.path.read_bytes()
            self._script = data, '"' + hashlib.sha256(data).hexdigest()[:20] + '"'
        return self._script

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        data, etag = self._load()
        resp.set_header("Cache-Control", f"public, max-age={SCRIPT_MAX_AGE}")
        resp.set_header("ETag", etag)
        resp.set_header("Access-Control-Allow-Origin", "*")
        if req.get_header("If-None-Match") == etag:
            resp.status = falcon.HTTP_304
            return
        resp.content_type = "text/javascript; charset=utf-8"
        resp.data = data

    on_head = on_get
