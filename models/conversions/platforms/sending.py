"""Sending a platform connection's events: the outbound queue's rows, in batches, with its retries.

`deliver` is what the queue's task runs for any delivery: a postback target's goes to
models/conversions/outbound.py, a connection's event here. A sender claims the event it was given and
then the connection's other due events, up to the platform's batch limit, exactly as a postback is
claimed (so two senders never send one event, and a sent event is never sent again), sends them in
one request, and writes each event's outcome: sent; pending with the backoff (or the platform's
Retry-After) when the platform failed, answered garbage or did not answer; failed when the platform
refused that one row (Google's partial failure) or after MAX_ATTEMPTS; expired when Meta's 7-day
limit has passed (Meta would refuse the whole batch for it). A paused connection's events are put
back untried until it is resumed.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType

from peewee import Database

from models.conversions.outbound import (
    MAX_ATTEMPTS,
    REQUEST_TIMEOUT,
    DeliveryResult,
    backoff_seconds,
    http_send,
    revenue,
    send_delivery,
)
from models.conversions.platforms import google_ads, meta, tiktok
from models.conversions.platforms.events import (
    CLICK_ID_PARAMS,
    Answer,
    Connection,
    Event,
    Request,
    answer_text,
    click_id_slots,
    event_id,
)
from models.store.database import write_tx
from models.store.deliveries import DeliveryStore

PLATFORMS: dict[str, ModuleType] = {"meta": meta, "tiktok": tiktok, "google_ads": google_ads}
USER_AGENT = "Lanner-Conversions/1.0"
HOLD_MS = 3_600_000  # A paused connection's events wait this long, or until `resume` makes them due.
MAX_RETRY_AFTER = 6 * 3600.0
CLICK_COLUMNS = ("subid", "created_at", "ip", "user_agent", "country")


@dataclass(frozen=True)
class PlatformConfig:
    """What sending needs from the settings: each platform's base URL and the sub_id aliases."""

    urls: Mapping[str, str]
    sub_id_aliases: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings) -> PlatformConfig:
        urls = {
            "meta": settings.meta_api_url,
            "tiktok": settings.tiktok_api_url,
            "google_ads": settings.google_ads_api_url,
        }
        return cls(urls, dict(settings.sub_id_aliases))


@dataclass(frozen=True)
class Reply:
    code: int | None  # None: no answer (refused connection, timeout).
    body: bytes
    retry_after: float | None = None
    error: str = ""


Post = Callable[[Request], Reply]


def retry_after_seconds(value: str | None) -> float | None:
    try:
        seconds = float(value or "")
    except ValueError:
        return None  # An HTTP date is allowed too; the backoff then decides.
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A platform API never redirects a POST; following one would carry the credential headers to
    whatever host it names. The 3xx is the answer (an HTTPError), retried like any other."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def http_post(request: Request, timeout: float = REQUEST_TIMEOUT) -> Reply:
    """POST the request, redirects not followed; never raises for network trouble."""
    headers = {"User-Agent": USER_AGENT, **request.headers}
    http_request = urllib.request.Request(request.url, data=request.body, method="POST", headers=headers)
    try:
        with _opener.open(http_request, timeout=timeout) as response:
            return Reply(response.status, response.read(1 << 20))
    except urllib.error.HTTPError as exc:
        body = exc.read(1 << 20) if exc.fp is not None else b""
        return Reply(exc.code, body, retry_after_seconds(exc.headers.get("Retry-After")))
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Reply(None, b"", error=f"The request failed: {reason}.")


def deliver(
    db: Database,
    delivery_id: int,
    *,
    retry_base: float,
    config: PlatformConfig,
    clock=time.time,
    send=http_send,
    post: Post = http_post,
) -> DeliveryResult:
    """One attempt at any delivery of the outbound queue."""
    connection_id, state = DeliveryStore(db.connection()).connection_of(delivery_id)
    if connection_id is None:
        return send_delivery(db, delivery_id, retry_base=retry_base, clock=clock, send=send)
    if state != "pending":  # PERF: sent in a batch-mate's request; its own task reads, never writes.
        return DeliveryResult(state or "missing")
    return send_events(
        db, delivery_id, connection_id, retry_base=retry_base, config=config, clock=clock, post=post
    )


def send_events(
    db: Database,
    delivery_id: int,
    connection_id: int,
    *,
    retry_base: float,
    config: PlatformConfig,
    clock=time.time,
    post: Post = http_post,
) -> DeliveryResult:
    """Claim this event and the connection's other due ones, send them in one request, record each."""
    store = DeliveryStore(db.connection())
    row = store.connection(connection_id)
    assert row is not None  # A delivery's connection is never deleted.
    connection = Connection.from_row(row)
    platform = PLATFORMS[connection.platform]
    now_ms = int(clock() * 1000)
    lease_ms = int((REQUEST_TIMEOUT + 30) * 1000)
    with write_tx(db):
        if not store.claim(delivery_id, now_ms, now_ms + lease_ms):
            state = store.state(delivery_id)
            return DeliveryResult("busy" if state == "pending" else (state or "missing"))
        # Its own, claimed just above, is no longer due: the others fill the batch.
        mates = store.claim_due_events(connection_id, now_ms, now_ms + lease_ms, platform.BATCH_LIMIT - 1)
        batch = [delivery_id, *mates]
    if connection.status == "removed":
        error = "The connection was removed."
        done_ms = int(clock() * 1000)
        with write_tx(db):
            for claimed in batch:
                store.mark_not_sent(claimed, "failed", "", None, error, done_ms, done_ms)
        return DeliveryResult("failed", error=error)
    if connection.status != "active":
        with write_tx(db):
            for claimed in batch:
                store.release(claimed, now_ms + HOLD_MS, now_ms)
        return DeliveryResult("held", error="The connection is paused.")

    events, attempts, skipped = _events(store, connection, platform, batch, config, now_ms)
    base_url = config.urls[connection.platform]
    url = platform.request(connection, events[:1], base_url).url if events else ""
    # Splitting stops halfway through the claim: a batch still refused then waits for its next attempt.
    split_until = time.monotonic() + lease_ms / 2000
    answers = _send(platform, connection, events, base_url, post, split_until) if events else []
    done_ms = int(clock() * 1000)
    results: dict[int, DeliveryResult] = {}
    with write_tx(db):
        for claimed, (state, error) in skipped.items():
            store.mark_not_sent(claimed, state, url, None, error, done_ms, done_ms)
            results[claimed] = DeliveryResult(state, url, None, error)
        for event, answer, code in answers:
            claimed = event.delivery_id
            if answer.ok and claimed not in answer.failed_rows:
                store.mark_not_sent(claimed, "sent", url, code, "", done_ms, done_ms)
                results[claimed] = DeliveryResult("sent", url, code)
            elif answer.ok or answer.refused_content:
                # The platform refused this event alone (a row of Google's, or the one event left of a
                # batch Meta or TikTok refused): sending it again changes nothing.
                error = answer.failed_rows.get(claimed, answer.text)
                store.mark_not_sent(claimed, "failed", url, code, error, done_ms, done_ms)
                results[claimed] = DeliveryResult("failed", url, code, error)
            else:
                # The whole batch waits as long as the event whose task sent it: that task comes back
                # for them all then (a batch-mate's own task found it claimed, and ended).
                gave_up = attempts[claimed] >= MAX_ATTEMPTS
                retry_in = (
                    None
                    if gave_up
                    else max(backoff_seconds(attempts[delivery_id], retry_base), answer.retry_after or 0)
                )
                state = "failed" if gave_up else "pending"
                next_ms = done_ms + int((retry_in or 0) * 1000)
                store.mark_not_sent(claimed, state, url, code, answer.text, next_ms, done_ms)
                results[claimed] = DeliveryResult(state, url, code, answer.text, retry_in)
    return results[delivery_id]


def _send(
    platform: ModuleType,
    connection: Connection,
    events: list[Event],
    base_url: str,
    post: Post,
    split_until: float,
) -> list[tuple[Event, Answer, int | None]]:
    """Each event with the platform's answer to the request that carried it. A batch Meta or TikTok
    refuses for its content is split in halves and each sent again, down to the one event at fault,
    so one bad event does not hold back the others (about 2 log2(n) requests more for one)."""
    reply = post(platform.request(connection, events, base_url))
    if reply.code is None:
        return [(event, Answer(False, reply.error), None) for event in events]
    answer = platform.read_answer(reply.code, reply.body, events)
    answer.retry_after = reply.retry_after
    if reply.code == 429:
        answer = Answer(False, f"Rate limited (429): {answer_text(reply.body, 200)}", reply.retry_after)
    if answer.refused_content and len(events) > 1:
        if time.monotonic() > split_until:  # No time left in the claim: all of them later.
            answer.refused_content = False
            return [(event, answer, reply.code) for event in events]
        half = len(events) // 2
        return [
            *_send(platform, connection, events[:half], base_url, post, split_until),
            *_send(platform, connection, events[half:], base_url, post, split_until),
        ]
    return [(event, answer, reply.code) for event in events]


def _events(
    store: DeliveryStore,
    connection: Connection,
    platform: ModuleType,
    batch: list[int],
    config: PlatformConfig,
    now_ms: int,
) -> tuple[list[Event], dict[int, int], dict[int, tuple[str, str]]]:
    """The batch's events to send, each one's attempts, and those not to send: {id: (state, why)}."""
    events: list[Event] = []
    attempts: dict[int, int] = {}
    skipped: dict[int, tuple[str, str]] = {}
    slots_of: dict[int, dict[str, int]] = {}
    for claimed in batch:
        row = store.event(claimed)
        assert row is not None  # Claimed just before.
        _, status, tries, queued_at, conversion_id, payout, currency, click_id, campaign_id = row
        attempts[claimed] = tries
        if campaign_id not in slots_of:
            slots_of[campaign_id] = click_id_slots(
                store.source_parameters(campaign_id), config.sub_id_aliases
            )
        slots = slots_of[campaign_id]
        columns = CLICK_COLUMNS + tuple(f"sub_id_{slot}" for slot in slots.values())
        click = store.click_values(click_id, columns)
        event_name = connection.events.get(status)
        if not event_name:
            skipped[claimed] = ("failed", f"The connection no longer sends {status} conversions.")
            continue
        event = Event(
            delivery_id=claimed,
            event_id=event_id(conversion_id, status),
            event_name=event_name,
            event_time=queued_at // 1000,
            value=revenue(status, payout),
            currency=currency,
            click_time_ms=int(str(click.get("created_at") or 0)),
            ip=str(click.get("ip") or ""),
            user_agent=str(click.get("user_agent") or ""),
            country=str(click.get("country") or ""),
            subid=str(click.get("subid") or ""),
            click_ids={
                name: str(click.get(f"sub_id_{slot}") or "")
                for name, slot in slots.items()
                if name in CLICK_ID_PARAMS and click.get(f"sub_id_{slot}")
            },
        )
        if platform.MAX_AGE_SECONDS and now_ms // 1000 - event.event_time > platform.MAX_AGE_SECONDS:
            days = round(platform.MAX_AGE_SECONDS / 86400)
            skipped[claimed] = (
                "expired",
                f"Older than {days} days: the platform refuses such an event (and its whole batch with it), "
                "so it was not sent.",
            )
            continue
        problem = platform.unusable(event)
        if problem:
            skipped[claimed] = ("failed", problem)
            continue
        events.append(event)
    return events, attempts, skipped


def send_test_event(
    connection: Connection, config: PlatformConfig, *, clock=time.time, post: Post = http_post
) -> Answer:
    """A made-up event sent at once, outside the queue, to check the credentials: the platform's answer."""
    platform = PLATFORMS[connection.platform]
    now = int(clock())
    status, event_name = next(iter(connection.events.items()), ("sale", "Purchase"))
    event = Event(
        delivery_id=0,
        event_id=f"lanner-test-{now}",
        event_name=event_name,
        event_time=now,
        value=1.0,
        currency="USD",
        click_time_ms=now * 1000,
        ip="203.0.113.1",
        user_agent=USER_AGENT,
        subid="lanner-test",
        click_ids={platform.CLICK_ID: f"lanner-test-{now}"},
    )
    reply = post(platform.request(connection, [event], config.urls[connection.platform], is_test=True))
    if reply.code is None:
        return Answer(False, reply.error)
    answer = platform.read_answer(reply.code, reply.body, [event])
    if answer.ok and answer.failed_rows:  # Only Google answers per row.
        return google_ads.test_verdict(answer.failed_rows[0])
    return answer
