"""The alert queue: a message is queued (a row of `alert`) in the transaction of what calls for it, and
the worker's `send_alert` task sends it; the periodic `send_due_alerts` picks up any whose task was
lost and any retry that is due. The row is the delivery log: attempts, the service's last answer.

Never lost: a queued alert stays pending until it is sent or has failed MAX_ATTEMPTS times (a bad
token, a 500, garbage, a hang are all retried, doubling from LANNER_ALERT_RETRY_SECONDS, or after the
Retry-After a 429 asks for); a paused channel's alerts wait for it. Never twice: `dedupe_key` is unique
per channel, so the same cause queues one message, and a sender claims a row (moves its next attempt
past the request's timeout) before sending, so two senders never send one alert at once. A receiver
that answered after the timeout may see a retry: the webhook carries Lanner-Alert-Id to drop it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from peewee import Database, IntegrityError

from models.alerts.channels import get_channel_row
from models.alerts.senders import SENDERS, AlertConfig, Message
from models.conversions.outbound import backoff_seconds
from models.reporting.timerange import localise_times, zone
from models.store.database import write_tx
from models.tables.alerts import Alert, AlertChannel

MAX_ATTEMPTS = 10
LEASE_SECONDS = 60  # Past any request's timeout: a claimed alert is retried only after it.


def _now_ms() -> int:
    return int(time.time() * 1000)


def queue_alert(
    db: Database,
    channel_id: int,
    key: str,
    kind: str,
    title: str,
    body: str,
    data: dict[str, Any],
    *,
    now_ms: int | None = None,
) -> int | None:
    """Queue a message to a channel in the caller's transaction; its id, or None when one with the same
    key was queued to it before (whatever became of it)."""
    now_ms = _now_ms() if now_ms is None else now_ms
    if Alert.get_or_none((Alert.channel_id == channel_id) & (Alert.dedupe_key == key)) is not None:
        return None
    try:
        with db.atomic():  # A savepoint: another node's run may have queued it meanwhile.
            row = Alert.create(
                channel_id=channel_id,
                dedupe_key=key[:500],
                kind=kind,
                title=title[:300],
                body=body,
                data=json.dumps(data, default=str, sort_keys=True),
                next_attempt_at=now_ms,
                created_at=now_ms,
                updated_at=now_ms,
            )
    except IntegrityError:
        return None
    return row.id


def ops_channel_ids(db: Database) -> list[int]:
    """The channels that get the operations alerts (paused ones too: theirs wait)."""
    return [row.id for row in AlertChannel.select(AlertChannel.id).where(AlertChannel.is_ops == 1)]


@dataclass
class AlertResult:
    state: str  # sent, pending (will retry), failed (gave up), held (its channel is paused), busy, missing
    code: int | None = None
    error: str = ""
    retry_in: float | None = None


def send_alert(
    db: Database, alert_id: int, *, config: AlertConfig, retry_base: float, clock=time.time
) -> AlertResult:
    """One attempt at an alert, unless it is sent, given up, not due, or being sent elsewhere."""
    now_ms = int(clock() * 1000)
    with write_tx(db):
        claimed = (
            Alert.update(
                next_attempt_at=now_ms + LEASE_SECONDS * 1000, attempts=Alert.attempts + 1, updated_at=now_ms
            )
            .where((Alert.id == alert_id) & (Alert.state == "pending") & (Alert.next_attempt_at <= now_ms))
            .execute()
        )
    row = Alert.get_or_none(Alert.id == alert_id)
    if row is None:
        return AlertResult("missing")
    if not claimed:
        return AlertResult("busy" if row.state == "pending" else row.state)
    channel = AlertChannel.get_by_id(row.channel_id)
    if channel.status != "active":
        # Not an attempt: it waits for the channel, which makes it due when resumed.
        with write_tx(db):
            Alert.update(attempts=Alert.attempts - 1, next_attempt_at=now_ms + 3_600_000).where(
                Alert.id == alert_id
            ).execute()
        return AlertResult("held")
    message = Message(row.id, row.kind, row.title, row.body, json.loads(row.data), row.created_at)
    sender = SENDERS[channel.kind]
    result = sender(json.loads(channel.secrets), json.loads(channel.options), message, config)
    done_ms = int(clock() * 1000)
    if result.is_sent:
        with write_tx(db):
            Alert.update(
                state="sent", response_code=result.code, error="", sent_at=done_ms, updated_at=done_ms
            ).where(Alert.id == alert_id).execute()
        return AlertResult("sent", result.code)
    gave_up = row.attempts >= MAX_ATTEMPTS
    retry_in = None
    if not gave_up:
        retry_in = backoff_seconds(row.attempts, retry_base)
        if result.retry_after is not None:
            retry_in = max(result.retry_after, 1.0)
    state = "failed" if gave_up else "pending"
    with write_tx(db):
        Alert.update(
            state=state,
            response_code=result.code,
            error=result.error[:500],
            next_attempt_at=done_ms + int((retry_in or 0) * 1000),
            updated_at=done_ms,
        ).where(Alert.id == alert_id).execute()
    return AlertResult(state, result.code, result.error, retry_in)


def due_alerts(db: Database, *, clock=time.time, limit: int = 100) -> list[int]:
    """Pending alerts whose attempt is due (their task was lost, or a retry is due), oldest first."""
    query = (
        Alert.select(Alert.id)
        .where((Alert.state == "pending") & (Alert.next_attempt_at <= int(clock() * 1000)))
        .order_by(Alert.next_attempt_at, Alert.id)
        .limit(limit)
    )
    return [row.id for row in query]


def queue_test(db: Database, ref: str | int) -> int:
    """A test message to the channel, queued like any alert (so it is in its log); its id."""
    now_ms = _now_ms()
    with write_tx(db):
        channel = get_channel_row(ref)
        alert_id = queue_alert(
            db,
            channel.id,
            f"test:{now_ms}",
            "test",
            "Lanner test alert",
            f"This channel ({channel.name}) receives Lanner's alerts.",
            {"channel": channel.name},
            now_ms=now_ms,
        )
    assert alert_id is not None  # A key of this millisecond's own.
    return alert_id


LOG_COLUMNS = (
    "id",
    "channel",
    "kind",
    "title",
    "state",
    "attempts",
    "response_code",
    "error",
    "created_at",
    "sent_at",
)


def alert_log(
    db: Database,
    *,
    channel: str | None = None,
    state: str | None = None,
    limit: int = 100,
    timezone: str = "UTC",
) -> list[dict[str, Any]]:
    """The alerts queued, newest first, with each one's state and the service's last answer; times as ISO
    text in `timezone`."""
    query = Alert.select().order_by(Alert.id.desc()).limit(limit)
    if channel is not None:
        query = query.where(Alert.channel_id == get_channel_row(channel).id)
    if state:
        query = query.where(Alert.state == state)
    names = {row.id: row.name for row in AlertChannel.select(AlertChannel.id, AlertChannel.name)}
    rows = [
        {
            "id": row.id,
            "channel": names.get(row.channel_id, ""),
            "kind": row.kind,
            "title": row.title,
            "text": row.body,
            "state": row.state,
            "attempts": row.attempts,
            "response_code": row.response_code,
            "error": row.error,
            "created_at": row.created_at,
            "sent_at": row.sent_at,
        }
        for row in query
    ]
    return localise_times(rows, ("created_at", "sent_at"), zone(timezone))
