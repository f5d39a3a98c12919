"""`GET /<alias>`: the campaign URL. Parses the visit at the edge and answers the tracker's decision.

`GET /` on a domain that parks a campaign (models/routing/domains.py) is a click of that campaign.
Once any domain exists, a campaign URL on a host that is no domain, or not one of the campaign's
domains, is answered as an unknown campaign (the fallback).

`GET /lp/click?subid=SUBID` (and Keitaro's `GET /<alias>?_lp=1[&_subid=SUBID]`): the LP click, the
visitor following a lander's link to the offer (models/clicks/tracker.py `lp_click`). The subid comes
from the query, else the `lanner_subid` cookie set with the redirect to the lander, else the
Referer's `subid`/`_subid` (the lander's own URL).

`HEAD /<alias>` is answered like GET (same status and Location, no body) and counted as a bot's click:
link checkers and unfurlers send HEAD to see where a link goes; a person's browser never does.
"""

from __future__ import annotations

import html
import json
import re
import socket
from urllib.parse import parse_qs, quote, urlsplit

import falcon
from falcon.uri import parse_query_string

from models.choices import SUB_ID_SLOTS
from models.clicks.decision import Decision
from models.clicks.record import MAX_COST, host_domain
from models.clicks.refusals import SpoolUnwritable
from models.clicks.tracker import ClickTracker
from models.clicks.visit import Visit
from models.lookups.bots import request_signals
from models.lookups.iplist import IpList
from models.ops.metrics import (
    CLICK_PREFETCH,
    CLICK_UNKNOWN,
    REDIRECT_CLICK,
    REDIRECT_FALLBACK,
    REDIRECT_LP_CLICK,
    REDIRECT_REPEAT,
)
from models.routing.domains import host_of

MAX_VALUE = 500  # sub_id and source values; longer ones are cut, not rejected.
MAX_USER_AGENT = 1000
MAX_REFERRER = 2000
MAX_PARAMS = 50  # Query parameters kept for the `param` filter; sub_id slots are filled regardless.
LOCATION_SAFE = "!#$%&'()*+,/:;=?@[]~"  # URL delimiters and escapes: kept as they are.
NOT_A_CLICK_DESTINATIONS = frozenset({"image", "script", "style", "font", "audio", "video", "track"})
MAX_CACHED_SOURCES = 256  # Campaigns' source mappings a worker keeps resolved (VisitParser).
MAX_CACHED_VALUES = 1024  # Proxies' addresses and Host headers a worker keeps answers for.
SPOOL_FULL_RETRY_AFTER = 60  # Seconds, in the 503 of a click refused because the spool is unwritable.
SUBID_COOKIE = "lanner_subid"  # Set with the redirect to a lander: its LP click needs no parameter.
_HOST_PATTERN = re.compile(r"[0-9A-Za-z.\-:\[\]]{1,260}")  # What a lander's {offer} may put as its host.
MAX_SUBID_PARAM = 64  # A subid is 17 characters; a longer value is not one.
# The environ key of a click run in front of Falcon (routes/campaignurls.py) and handed to it with its
# answer to replay: what the handler did, done again to Falcon's Response.
ANSWERED = "lanner.click_answered"


def sub_id_params(aliases: dict[str, int]) -> dict[str, int]:
    """Every query parameter captured into a sub_id slot (1-based): sub_id_N, subN and aliases."""
    params = {}
    for slot in range(1, SUB_ID_SLOTS + 1):
        params[f"sub_id_{slot}"] = slot
        params[f"sub{slot}"] = slot
    params.update(aliases)
    return params


def _text(raw: str, limit: int) -> str:
    """A WSGI (latin-1) header value as the UTF-8 text the client meant, bounded; never raises."""
    if raw.isascii():  # PERF: nearly every header; ASCII is the same text in latin-1 and UTF-8.
        return raw[:limit]
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:
        text = raw.encode("utf-8", "replace").decode("utf-8")
    except UnicodeDecodeError:
        text = raw.encode("latin-1").decode("utf-8", "replace")
    return text[:limit]


def _param(value: str | list[str]) -> str:
    return (value[0] if isinstance(value, list) else value)[:MAX_VALUE]


def _cost(value: str, max_cost: float) -> float:
    """A click URL's cost=, or 0 (the campaign's cost model prices the click) for anything but a
    positive number up to `max_cost`: a visitor's `cost=1e308` summed into Infinity in every report."""
    try:
        cost = float(value)
    except ValueError:
        return 0.0
    # The flusher refuses a journal line with a cost past MAX_COST, whatever the setting says.
    return cost if 0 < cost <= min(max_cost, MAX_COST) else 0.0


def canonical_ip(value: str) -> str | None:
    """The canonical text of an IPv4/IPv6 address, or None. PERF: inet_pton is ~20x ipaddress."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_ntop(family, socket.inet_pton(family, value))
        except (OSError, ValueError):
            continue
    return None


class ClientAddress:
    """The visitor's IP: the peer, or the real-IP header when the peer is a trusted proxy.

    Trusted proxies are addresses or CIDR networks (a CDN's ranges), matched as LANNER_BOT_IPS is.
    """

    def __init__(self, trusted_proxies: tuple[str, ...], header: str, *, is_unix_socket: bool) -> None:
        self.trusted = IpList(trusted_proxies)
        self.environ_key = "HTTP_" + header.upper().replace("-", "_")
        self.is_unix_socket = is_unix_socket
        # PERF: peer -> in `trusted`; behind a proxy every request comes from one of a few peers, and a
        # click asks twice (the address, is_https). Emptied when full, so a flood of peers bounds it.
        self._peers: dict[str, bool] = {}

    def is_trusted(self, peer: str) -> bool:
        """`peer` (REMOTE_ADDR) is a trusted proxy."""
        trusted = self._peers.get(peer)
        if trusted is None:
            if len(self._peers) >= MAX_CACHED_VALUES:
                self._peers.clear()
            trusted = self._peers[peer] = peer in self.trusted
        return trusted

    def is_https(self, environ: dict) -> bool:
        """Over TLS: to us, or to the trusted proxy in front (its X-Forwarded-Proto)."""
        if environ.get("wsgi.url_scheme") == "https":
            return True
        if self.is_unix_socket or self.is_trusted(environ.get("REMOTE_ADDR", "")):
            return environ.get("HTTP_X_FORWARDED_PROTO", "").strip().lower() == "https"
        return False

    def __call__(self, environ: dict) -> str:
        peer = environ.get("REMOTE_ADDR", "")
        if self.is_unix_socket or self.is_trusted(peer):
            forwarded = environ.get(self.environ_key)
            if forwarded:
                address = canonical_ip(forwarded.strip())
                if address is not None:
                    return address
                # A broken proxy header: fall back to the peer we can see.
        return peer or "0.0.0.0"


def is_prefetch(environ: dict) -> bool:
    """A browser prefetch/prerender or a subresource load: not a visitor's click."""
    purpose = environ.get("HTTP_SEC_PURPOSE") or environ.get("HTTP_PURPOSE") or environ.get("HTTP_X_MOZ")
    if purpose and "prefetch" in purpose.lower():
        return True
    return environ.get("HTTP_SEC_FETCH_DEST", "") in NOT_A_CLICK_DESTINATIONS


def redirect_page(location: str, answer: str) -> str:
    """The 200 page of a meta-refresh or JavaScript redirect (for traffic that must not see a 302)."""
    url = html.escape(location, quote=True)
    if answer == "meta":
        head = f'<meta http-equiv="refresh" content="0;url={url}">'
        return f'<!doctype html><html><head>{head}</head><body><a href="{url}">Continue</a></body></html>'
    script = f"window.location.replace({json.dumps(location)});".replace("</", "<\\/")
    return (
        f"<!doctype html><html><head><script>{script}</script></head>"
        f'<body><noscript><a href="{url}">Continue</a></noscript></body></html>'
    )


def spool_unwritable() -> falcon.HTTPServiceUnavailable:
    """The 503 of a click that could not be recorded (the spool's disk is full)."""
    return falcon.HTTPServiceUnavailable(
        title="Click not recorded",
        description="The tracker cannot record clicks right now; try again shortly.",
        retry_after=SPOOL_FULL_RETRY_AFTER,
    )


class ClickResource:
    def __init__(
        self,
        tracker: ClickTracker,
        client_address: ClientAddress,
        sub_id_aliases: dict[str, int],
        fallback_url: str,
        max_click_cost: float,
        spool_full_answer: str = "503",
        tracker_hosts: frozenset[str] = frozenset(),
    ) -> None:
        self.tracker = tracker
        self.tracker_hosts = tracker_hosts  # LANNER_TRACKER_HOSTS: answer as a domain parking nothing.
        self.visit = VisitParser(client_address, sub_id_aliases, max_click_cost)
        self.fallback_url = fallback_url
        self.is_spool_full_fallback = spool_full_answer == "fallback"
        self.lp_clicks = LpClickResource(tracker, fallback_url, spool_full_answer)

    def on_get(self, req: falcon.Request, resp: falcon.Response, alias: str) -> None:
        answered = req.env.get(ANSWERED)
        if answered is not None:  # Clicked already, in front of Falcon: its answer, as Falcon's.
            answered.replay(resp)
            return
        resp.set_header("Cache-Control", "no-store")
        if "_lp=" in req.env.get("QUERY_STRING", ""):  # PERF: a substring test; parsed only then.
            params = parse_query_string(req.env["QUERY_STRING"], keep_blank=False, csv=False)
            if _param(params.get("_lp", "")) == "1":
                self.lp_clicks.on_get(req, resp)
                return
        campaign = self.tracker.campaign(alias)
        if campaign is not None and self.tracker.domains.roots:  # PERF: no domains, nothing to check.
            host = host_of(req.env.get("HTTP_HOST", ""))
            is_ours = host in self.tracker_hosts
            domains = self.tracker.domains if is_ours else self.tracker.domain_map(host)
            if not domains.allows(host, campaign.id, is_tracker_host=is_ours):
                campaign = None
        self._click(req, resp, campaign)

    def on_get_root(self, req: falcon.Request, resp: falcon.Response) -> None:
        """`GET /`: the campaign the Host's domain parks there; without domains, 404 as always."""
        resp.set_header("Cache-Control", "no-store")
        host = host_of(req.env.get("HTTP_HOST", ""))
        domains = self.tracker.domain_map(host)
        if not domains.roots:
            raise falcon.HTTPNotFound()
        campaign_id = domains.roots.get(host)
        campaign = self.tracker.campaigns_by_id.get(campaign_id) if campaign_id else None
        self._click(req, resp, campaign)

    def _click(self, req: falcon.Request, resp: falcon.Response, campaign) -> None:
        counts = self.tracker.counts  # The worker's metrics (models/ops/metrics.py).
        if campaign is None:
            counts[CLICK_UNKNOWN] += 1
            if self.fallback_url:
                counts[REDIRECT_FALLBACK] += 1
                resp.status = falcon.HTTP_302
                resp.set_header("Location", self.fallback_url)
                return
            raise falcon.HTTPNotFound(
                title="Unknown campaign", description="No active campaign has this URL."
            )
        if is_prefetch(req.env):
            # Counting it would make a click nobody made; the real navigation comes next.
            counts[CLICK_PREFETCH] += 1
            resp.status = falcon.HTTP_204
            return
        try:
            decision = self.tracker.track(campaign, self.visit(req.env, campaign.source_slots))
        except SpoolUnwritable:
            # Refused (and counted, logged) by the tracker: no subid that would never land.
            if not self.is_spool_full_fallback:
                raise spool_unwritable() from None
            counts[REDIRECT_FALLBACK] += 1
            resp.status = falcon.HTTP_302
            resp.set_header("Location", self.fallback_url)
            return
        if decision.answer == "http":
            counts[REDIRECT_REPEAT if decision.is_repeat else REDIRECT_CLICK] += 1
        if decision.lander_id is not None:
            # A local lander on the tracker's domain reads no parameter: its LP click has the cookie.
            resp.append_header(
                "Set-Cookie",
                f"{SUBID_COOKIE}={decision.subid}; Path=/; Max-Age={campaign.uniqueness_ms // 1000}; "
                "SameSite=Lax; HttpOnly",
            )
        answer(resp, decision)

    # The visit's bot signals say "head" (VisitParser): routed like any bot, stored as one.
    on_head = on_get
    on_head_root = on_get_root


def lp_subid(req: falcon.Request) -> str:
    """The LP click's subid: the query's `subid` (`_subid` in Keitaro's form), else the cookie set with
    the redirect to the lander, else the Referer's (the lander's URL); "" if none."""
    for name in ("subid", "_subid"):
        value = req.get_param(name)
        if value:
            return value[:MAX_SUBID_PARAM]
    value = req.cookies.get(SUBID_COOKIE)
    if value:
        return (value[0] if isinstance(value, list) else value)[:MAX_SUBID_PARAM]
    referrer = req.env.get("HTTP_REFERER", "")
    if "subid=" in referrer:
        query = parse_qs(urlsplit(referrer[:MAX_REFERRER]).query)
        for name in ("subid", "_subid"):
            if query.get(name):
                return query[name][0][:MAX_SUBID_PARAM]
    return ""


class LpClickResource:
    """`GET /lp/click`: the LP click. The offer chosen now is recorded before the 302 (see the module doc)."""

    def __init__(self, tracker: ClickTracker, fallback_url: str, spool_full_answer: str = "503") -> None:
        self.tracker = tracker
        self.fallback_url = fallback_url
        self.is_spool_full_fallback = spool_full_answer == "fallback"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        if req.method != "GET":  # A link checker's HEAD on the lander's link (/<alias>?_lp=1) is no LP click.
            raise falcon.HTTPMethodNotAllowed(["GET"])
        if is_prefetch(req.env):  # A browser prefetching the lander's link: the visitor has not clicked.
            resp.status = falcon.HTTP_204
            return
        subid = lp_subid(req)
        if not subid:
            raise falcon.HTTPBadRequest(
                title="No subid", description="An LP click needs the subid of its click (?subid=...)."
            )
        try:
            lp = self.tracker.lp_click(subid)
        except SpoolUnwritable:
            if not self.is_spool_full_fallback:
                raise spool_unwritable() from None
            lp = None
        if lp is None or lp.location is None:
            if self.fallback_url:
                self.tracker.counts[REDIRECT_FALLBACK] += 1
                resp.status = falcon.HTTP_302
                resp.set_header("Location", self.fallback_url)
                return
            if lp is None:
                raise falcon.HTTPNotFound(
                    title="Unknown click", description="No click sent to a lander has this subid."
                )
            raise falcon.HTTPNotFound(title="No offer", description="This campaign has nothing to show here.")
        self.tracker.counts[REDIRECT_LP_CLICK] += 1
        resp.status = falcon.HTTP_302
        location = lp.location
        if not location.isascii():
            location = quote(location, safe=LOCATION_SAFE)
        resp.set_header("Location", location)


class VisitParser:
    """A request's WSGI environ → the Visit the tracker needs (IP, UA, referrer, language, params)."""

    def __init__(
        self, client_address: ClientAddress, sub_id_aliases: dict[str, int], max_click_cost: float
    ) -> None:
        self.client_address = client_address
        self.sub_id_params = sub_id_params(sub_id_aliases)
        # id(a campaign's source_slots) -> (those slots, the query names that fill which slot for it).
        # The entry holds the slots dict, so its id cannot be another dict's while it is cached.
        self._source_params: dict[int, tuple[dict[str, int], dict[str, int]]] = {}
        self.max_click_cost = max_click_cost
        # PERF: Host header -> (its domain, the host a lander's {offer} may use or ""): a tracker is
        # reached by a few hosts. Emptied when full, so a flood of made-up hosts bounds it.
        self._hosts: dict[str, tuple[str, str]] = {}

    def _params_with(self, source_slots: dict[str, int]) -> dict[str, int]:
        """The names that fill a sub_id slot in a campaign with this source: its names, and sub_id_N,
        subN and LANNER_SUB_ID_ALIASES for the slots it leaves (a slot it maps is its names' only)."""
        taken = set(source_slots.values())
        params = {name: slot for name, slot in self.sub_id_params.items() if slot not in taken}
        params.update(source_slots)
        if len(self._source_params) >= MAX_CACHED_SOURCES:  # Configuration reloads leave old entries.
            self._source_params.clear()
        self._source_params[id(source_slots)] = (source_slots, params)
        return params

    def __call__(self, environ: dict, source_slots: dict[str, int] | None = None) -> Visit:
        """`source_slots`: the campaign's traffic source's name -> sub_id slot (models/routing/config.py)."""
        visit = Visit(
            ip=self.client_address(environ),
            user_agent=_text(environ.get("HTTP_USER_AGENT", ""), MAX_USER_AGENT),
            referrer=_text(environ.get("HTTP_REFERER", ""), MAX_REFERRER),
            accept_language=_text(environ.get("HTTP_ACCEPT_LANGUAGE", ""), MAX_VALUE),
            bot_signals=request_signals(environ),
        )
        host = environ.get("HTTP_HOST")
        if host:
            known = self._hosts.get(host)
            if known is None:
                if len(self._hosts) >= MAX_CACHED_VALUES:
                    self._hosts.clear()
                known = self._hosts[host] = (host_domain(host), host if _HOST_PATTERN.fullmatch(host) else "")
            visit.domain, visit.host = known
            visit.is_https = self.client_address.is_https(environ)
        query = environ.get("QUERY_STRING")
        if query:
            params = parse_query_string(query, keep_blank=False, csv=False)
            slots = self.sub_id_params
            if source_slots is not None:  # PERF: one dict lookup; a campaign without a source: none.
                cached = self._source_params.get(id(source_slots))
                if cached is not None and cached[0] is source_slots:
                    slots = cached[1]
                else:
                    slots = self._params_with(source_slots)
            kept = visit.params
            for name, value in params.items():
                value = _param(value)
                if len(kept) < MAX_PARAMS:
                    kept[name[:MAX_VALUE]] = value
                slot = slots.get(name)
                if slot is not None:
                    visit.sub_ids[slot - 1] = value
            if "source" in params:
                visit.source = _param(params["source"])
            if "external_id" in params:
                visit.external_id = _param(params["external_id"])
            if "keyword" in params:
                visit.keyword = _param(params["keyword"])
            if "cost" in params:
                visit.cost = _cost(_param(params["cost"]), self.max_click_cost)
        return visit


def with_source_slots(visit: Visit, source_slots: dict[str, int] | None) -> Visit:
    """A parsed visit's sub_ids with its campaign's traffic source's parameters applied, as the click
    path applies them (`lanner simulate` parses the URL before it knows the campaign): a slot the
    source maps holds its name's value only."""
    for name, slot in (source_slots or {}).items():
        visit.sub_ids[slot - 1] = visit.params.get(name, "")
    return visit


def visit_from_url(
    url: str,
    *,
    ip: str,
    user_agent: str = "",
    referrer: str = "",
    language: str = "",
    method: str = "GET",
    headers: tuple[str, ...] = (),
    sub_id_aliases: dict[str, int] | None = None,
    max_click_cost: float,
) -> tuple[str, Visit]:
    """(campaign alias, Visit) for a campaign URL as the edge would parse it (`lanner simulate`).

    Raises ValueError with one sentence for an unusable URL, IP, method or header.
    """
    method = method.upper()
    if method not in ("GET", "HEAD"):
        raise ValueError(f"{method!r} is not a method a campaign URL answers (GET or HEAD).")
    parts = urlsplit(url)
    alias = parts.path.strip("/")
    if not alias or "/" in alias:
        raise ValueError(f"{url!r} is not a campaign URL such as /alias?sub1=x.")
    address = canonical_ip(ip)
    if address is None:
        raise ValueError(f"{ip!r} is not an IPv4 or IPv6 address.")
    extra = {}
    for header in headers:
        name, separator, value = header.partition(":")
        if not separator or not name.strip():
            raise ValueError(f"{header!r} is not a header of the form 'Name: value'.")
        extra[name.strip()] = value.strip()
    for name, value in (("User-Agent", user_agent), ("Referer", referrer), ("Accept-Language", language)):
        if value:
            extra[name] = value
    from falcon.testing import create_environ  # Not on the click path.

    sent = {name: value for name, value in extra.items() if value}
    environ = create_environ(path="/" + alias, query_string=parts.query, headers=sent, method=method)
    if not any(name.lower() == "user-agent" for name in sent):
        # create_environ fills in its own client's User-Agent; a visitor who sent none is a bot.
        del environ["HTTP_USER_AGENT"]
    environ["REMOTE_ADDR"] = address
    parser = VisitParser(
        ClientAddress((), "X-Real-IP", is_unix_socket=False), sub_id_aliases or {}, max_click_cost
    )
    return alias, parser(environ)


def answer(resp: falcon.Response, decision: Decision) -> None:
    """The visitor's response for a decision (models/clicks/decision.py ANSWERS)."""
    kind = decision.answer
    if kind == "http":
        resp.status = falcon.HTTP_302
        # Not `resp.location`: Falcon re-encodes the whole URL, escapes included, when any character
        # needs encoding. Ours is safe by construction: a validated template compiled to printable
        # ASCII (models/routing/macros.py), percent-encoded values.
        location = decision.location
        assert location is not None  # Every http, meta and js answer has one.
        if not location.isascii():
            # Only a debounced repeat of a click journaled before templates were compiled to ASCII:
            # a header bjoern cannot encode answers an empty 500.
            location = quote(location, safe=LOCATION_SAFE)
        resp.set_header("Location", location)
    elif kind in ("meta", "js"):
        resp.content_type = falcon.MEDIA_HTML
        assert decision.location is not None
        resp.text = redirect_page(decision.location, kind)
    elif kind in ("html", "blank"):
        resp.content_type = falcon.MEDIA_HTML
        resp.text = decision.body
    else:
        raise falcon.HTTPNotFound(title="No offer", description="This campaign has nothing to show here.")
