"""Outbound postbacks: telling the traffic source about a conversion, once per (conversion, target, status).

A delivery row is written in the same transaction as the conversion change that calls for it
(models/conversions/postbacks.py), so none is forgotten if a process dies; the Huey task `send_postback`
then sends it, and the periodic `send_due_postbacks` picks up any whose task was lost. A sender
first claims the row (moves its next attempt past the request's timeout), so two senders never
send the same delivery at once, and a sent delivery is never sent again.

The URL is a template with the offer URL's macros (the click's values) plus the conversion's:
`{status}`, `{payout}`, `{revenue}`, `{currency}`, `{tid}`, `{conversion_id}`. POST sends the
URL's query string as a form body to the URL without it.
"""

from __future__ import annotations

import datetime
import http.client
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from peewee import Database

from models.clicks.record import CLICK_COLUMNS
from models.conversions.postbacks import LEAD, REBILL, SALE
from models.errors import LannerError
from models.routing.macros import MACRO_NAMES, UrlTemplate, compile_url
from models.store.database import write_tx
from models.store.deliveries import DeliveryStore

CONVERSION_MACROS = frozenset({"status", "payout", "revenue", "currency", "tid", "conversion_id"})
MAX_ATTEMPTS = 10
MAX_BACKOFF_SECONDS = 6 * 3600
REQUEST_TIMEOUT = 10.0
USER_AGENT = "Lanner-Postback/1.0"

# The offer URL's macros a stored click has a column for (all but campaign_name and random).
CLICK_MACRO_COLUMNS = tuple(sorted(MACRO_NAMES & set(CLICK_COLUMNS)))


class OutboundError(LannerError, ValueError):
    """A postback target that cannot be used; the message is one sentence for the user."""


def amount_text(value: float) -> str:
    """A money amount with all its digits (`:g` would send 12345.67 as 12345.7)."""
    return f"{value:.15g}"


@dataclass
class DeliveryResult:
    state: str  # sent, pending (will retry), failed (gave up), busy (another sender has it)
    url: str = ""
    response_code: int | None = None
    error: str = ""
    retry_in: float | None = None


def compile_target_url(url: str) -> UrlTemplate:
    """An outbound postback URL template, validated like an offer URL; OutboundError if unusable."""
    from models.routing.macros import MacroError

    try:
        return compile_url(url, CONVERSION_MACROS)
    except MacroError as exc:
        raise OutboundError(re.sub("offer url", "postback URL", str(exc), flags=re.IGNORECASE)) from None


def revenue(status: str, payout: float) -> float:
    return payout if status in (LEAD, SALE, REBILL) else 0.0


def backoff_seconds(attempt: int, base: float) -> float:
    """The wait after failed attempt number `attempt` (1-based): doubling from `base`, capped."""
    return min(base * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS)


def http_send(url: str, method: str, timeout: float = REQUEST_TIMEOUT) -> tuple[int | None, str]:
    """(HTTP status, error sentence or ''); never raises for network trouble."""
    try:
        data = None
        if method == "POST":
            parts = urlsplit(url)
            data = parts.query.encode("ascii")
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment))
        request = urllib.request.Request(url, data=data, method=method, headers={"User-Agent": USER_AGENT})
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, f"The target answered {exc.code}."
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"The request failed: {reason}."


def render_delivery(
    template: UrlTemplate, status: str, conversion: tuple, click: Mapping[str, object], campaign_name: str
) -> str:
    conversion_id, tid, payout, currency = conversion
    values = {name: "" if value is None else str(value) for name, value in click.items()}
    values.update(
        campaign_name=campaign_name,
        status=status,
        payout=amount_text(payout),
        revenue=amount_text(revenue(status, payout)),
        currency=currency,
        tid=tid,
        conversion_id=str(conversion_id),
    )
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) if template.uses_date else None
    return template.render(values, now)


def send_delivery(
    db: Database, delivery_id: int, *, retry_base: float, clock=time.time, send=http_send
) -> DeliveryResult:
    """Make one attempt at a delivery, unless it is sent, given up, not due, or being sent elsewhere."""
    store = DeliveryStore(db.connection())
    now_ms = int(clock() * 1000)
    lease_ms = int((REQUEST_TIMEOUT + 30) * 1000)
    with write_tx(db):
        claimed = store.claim(delivery_id, now_ms, now_ms + lease_ms)
    if not claimed:
        state = store.state(delivery_id)
        return DeliveryResult("busy" if state == "pending" else (state or "missing"))
    row = store.delivery(delivery_id)
    assert row is not None  # Claimed just above.
    (
        status,
        attempts,
        target_status,
        url_template,
        method,
        conversion_id,
        tid,
        payout,
        currency,
        click_id,
        name,
    ) = row
    click = store.click_values(click_id, CLICK_MACRO_COLUMNS)
    unusable = True  # A removed target or a template that no longer compiles: give up at once.
    if target_status != "active":
        code, error, url = None, "The target was removed.", url_template
    else:
        try:
            template = compile_target_url(url_template)
        except OutboundError as exc:
            code, error, url = None, str(exc), url_template
        else:
            unusable = False
            url = render_delivery(template, status, (conversion_id, tid, payout, currency), click, name)
            code, error = send(url, method)
    done_ms = int(clock() * 1000)
    if code is not None and 200 <= code < 300:
        with write_tx(db):
            store.mark_sent(delivery_id, url, code, done_ms)
        return DeliveryResult("sent", url, code)
    gave_up = attempts >= MAX_ATTEMPTS or unusable
    retry_in = None if gave_up else backoff_seconds(attempts, retry_base)
    state = "failed" if gave_up else "pending"
    next_ms = done_ms + int((retry_in or 0) * 1000)
    with write_tx(db):
        store.mark_not_sent(delivery_id, state, url, code, error, next_ms, done_ms)
    return DeliveryResult(state, url, code, error, retry_in)


def due_deliveries(db: Database, *, clock=time.time, limit: int = 100) -> list[int]:
    """Pending deliveries whose next attempt is due (their task was lost, or a retry is due)."""
    return DeliveryStore(db.connection()).due(int(clock() * 1000), limit)
