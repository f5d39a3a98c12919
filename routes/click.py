"""`GET /<alias>`: the campaign URL. Parses the visit at the edge and answers the tracker's decision."""

from __future__ import annotations

import math
import socket

import falcon
from falcon.uri import parse_query_string

from models.click import SUB_ID_SLOTS
from models.tracking import ClickTracker, Visit

MAX_VALUE = 500  # sub_id and source values; longer ones are cut, not rejected.
MAX_USER_AGENT = 1000
MAX_REFERRER = 2000


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
    try:
        text = raw.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:
        text = raw.encode("utf-8", "replace").decode("utf-8")
    except UnicodeDecodeError:
        text = raw.encode("latin-1").decode("utf-8", "replace")
    return text[:limit]


def _param(value: str | list[str]) -> str:
    return (value[0] if isinstance(value, list) else value)[:MAX_VALUE]


def _cost(value: str) -> float:
    try:
        cost = float(value)
    except ValueError:
        return 0.0
    return cost if math.isfinite(cost) and cost > 0 else 0.0


def canonical_ip(value: str) -> str | None:
    """The canonical text of an IPv4/IPv6 address, or None. PERF: inet_pton is ~20x ipaddress."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_ntop(family, socket.inet_pton(family, value))
        except (OSError, ValueError):
            continue
    return None


class ClientAddress:
    """The visitor's IP: the peer, or the real-IP header when the peer is a trusted proxy."""

    def __init__(self, trusted_proxies: tuple[str, ...], header: str, *, is_unix_socket: bool) -> None:
        self.trusted = frozenset(trusted_proxies)
        self.environ_key = "HTTP_" + header.upper().replace("-", "_")
        self.is_unix_socket = is_unix_socket

    def __call__(self, environ: dict) -> str:
        peer = environ.get("REMOTE_ADDR", "")
        if self.is_unix_socket or peer in self.trusted:
            forwarded = environ.get(self.environ_key)
            if forwarded:
                address = canonical_ip(forwarded.strip())
                if address is not None:
                    return address
                # A broken proxy header: fall back to the peer we can see.
        return peer or "0.0.0.0"


class ClickResource:
    def __init__(
        self,
        tracker: ClickTracker,
        client_address: ClientAddress,
        sub_id_aliases: dict[str, int],
        fallback_url: str,
    ) -> None:
        self.tracker = tracker
        self.client_address = client_address
        self.sub_id_params = sub_id_params(sub_id_aliases)
        self.fallback_url = fallback_url

    def on_get(self, req: falcon.Request, resp: falcon.Response, alias: str) -> None:
        resp.set_header("Cache-Control", "no-store")
        campaign = self.tracker.campaign(alias)
        if campaign is None:
            if self.fallback_url:
                resp.status = falcon.HTTP_302
                resp.set_header("Location", self.fallback_url)
                return
            raise falcon.HTTPNotFound(
                title="Unknown campaign", description="No active campaign has this URL."
            )
        decision = self.tracker.track(campaign, self.visit(req))
        if decision.location is None:
            raise falcon.HTTPNotFound(title="No offer", description="This campaign has nothing to show here.")
        resp.status = falcon.HTTP_302
        # Not `resp.location`: Falcon re-encodes the whole URL, escapes included, when any character
        # needs encoding. Ours is safe by construction: a validated template, percent-encoded values.
        resp.set_header("Location", decision.location)

    def visit(self, req: falcon.Request) -> Visit:
        environ = req.env
        visit = Visit(
            ip=self.client_address(environ),
            user_agent=_text(environ.get("HTTP_USER_AGENT", ""), MAX_USER_AGENT),
            referrer=_text(environ.get("HTTP_REFERER", ""), MAX_REFERRER),
        )
        query = environ.get("QUERY_STRING")
        if query:
            params = parse_query_string(query, keep_blank=False, csv=False)
            slots = self.sub_id_params
            for name, value in params.items():
                slot = slots.get(name)
                if slot is not None:
                    visit.sub_ids[slot - 1] = _param(value)
            if "source" in params:
                visit.source = _param(params["source"])
            if "external_id" in params:
                visit.external_id = _param(params["external_id"])
            if "cost" in params:
                visit.cost = _cost(_param(params["cost"]))
        return visit
