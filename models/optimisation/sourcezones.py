"""PropellerAds' advertiser API v5: a campaign's excluded zones, read and replaced.

With the Bearer token of the account's profile as for the statistics (models/reporting/spend/propellerads.py).
PropellerAds' documentation (https://ssp-api.propellerads.com/v5/docs/) is in no stored source: only the path
/adv/campaigns/{campaignId}/targeting/exclude/zone is citable (PropellerAds' OpenAPI file's list of paths, as
copied by a third party: docs/platforms.md, "The PropellerAds contract"). The bodies below are assumed,
unverified: `PUT /v5/adv/campaigns/{id}/targeting/exclude/zone` with {"zone": [zone ids as numbers]} sets
the campaign's excluded zones to that list (taken to replace the list, not add to it: hence a read first
and the union sent), answering {"result": true}; `GET` of the same path answers {"zone": [ids]}. Any other
answer is refused with its status and {"message": ...} if it has one.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable

from models.conversions.platforms.events import answer_text
from models.conversions.platforms.sending import Reply, retry_after_seconds
from models.errors import LannerError

USER_AGENT = "Lanner-Rules/1.0"
REQUEST_TIMEOUT = 20.0  # A rule run waits this long at most for each call; past it, the next run retries.
MAX_ZONES = 100_000  # An exclusion list longer than this is garbage, not a list.
LABEL = "PropellerAds"

Send = Callable[[str, str, dict[str, str], bytes | None], Reply]


class SourceRefused(LannerError):
    """The source refused, failed, answered garbage or nothing: one sentence for the rule's log."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the token to whatever host it names: it is the answer."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def http_send(
    method: str, url: str, headers: dict[str, str], body: bytes | None, timeout: float = REQUEST_TIMEOUT
) -> Reply:
    """One request (the URL holds no credential), redirects not followed; never raises."""
    request = urllib.request.Request(
        url, data=body, method=method, headers={"User-Agent": USER_AGENT, **headers}
    )
    try:
        with _opener.open(request, timeout=timeout) as response:
            return Reply(response.status, response.read(16 << 20))
    except urllib.error.HTTPError as exc:
        said = exc.read(1 << 20) if exc.fp is not None else b""
        return Reply(exc.code, said, retry_after_seconds(exc.headers.get("Retry-After")))
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Reply(None, b"", error=f"The request failed: {reason}.")


def is_zone_id(value: str) -> bool:
    """PropellerAds' zone ids are whole numbers."""
    return value.isascii() and value.isdigit() and 0 < len(value) <= 18


def _url(base_url: str, campaign_id: str) -> str:
    return f"{base_url}/v5/adv/campaigns/{campaign_id}/targeting/exclude/zone"


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _refused(reply: Reply, campaign_id: str) -> SourceRefused:
    if reply.code is None:
        return SourceRefused(
            f"{LABEL} did not answer for campaign {campaign_id}: {reply.error or 'no reply'}"
        )
    try:
        payload = json.loads(reply.body)
    except ValueError:
        payload = None
    said = None
    if isinstance(payload, dict):
        said = payload.get("message") or payload.get("errors")
    text = str(said)[:300] if said else f"an unexpected body: {answer_text(reply.body, 200)}"
    return SourceRefused(f"{LABEL} answered {reply.code} for campaign {campaign_id}: {text}")


def excluded_zones(base_url: str, token: str, campaign_id: str, send: Send) -> list[str]:
    """The platform campaign's excluded zones, as text; SourceRefused for anything but the list."""
    reply = send("GET", _url(base_url, campaign_id), _headers(token), None)
    if reply.code != 200:
        raise _refused(reply, campaign_id)
    try:
        payload = json.loads(reply.body)
    except ValueError:
        payload = None
    zones = payload.get("zone") if isinstance(payload, dict) else None
    if (
        not isinstance(zones, list)
        or len(zones) > MAX_ZONES
        or not all(isinstance(z, int) and not isinstance(z, bool) for z in zones)
    ):
        raise SourceRefused(
            f"{LABEL} answered campaign {campaign_id}'s excluded zones with something that is not a list "
            f"of zone ids: {answer_text(reply.body, 200)}"
        )
    return [str(zone) for zone in zones]


def set_excluded_zones(base_url: str, token: str, campaign_id: str, zones: list[str], send: Send) -> str:
    """Replace the campaign's excluded zones by `zones`; the platform's answer as text."""
    body = json.dumps({"zone": [int(zone) for zone in zones]}).encode()
    headers = {**_headers(token), "Content-Type": "application/json"}
    reply = send("PUT", _url(base_url, campaign_id), headers, body)
    if reply.code is None or not 200 <= reply.code < 300:
        raise _refused(reply, campaign_id)
    try:
        payload = json.loads(reply.body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or payload.get("result") is not True:
        raise SourceRefused(
            f"{LABEL} answered {reply.code} for campaign {campaign_id} without confirming the change: "
            f"{answer_text(reply.body, 200)}"
        )
    return f"{reply.code} {answer_text(reply.body, 200)}"
