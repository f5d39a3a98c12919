"""Platform connections: create, list, show (credentials masked), change, pause and resume them, send
a test event, read their event log. The library the CLI, the admin API and the panel call; every
error is an AdminError with one sentence for the user; every change is in the audit log (entity
`platform_connection`) with its credentials masked.

Credentials must be sent to the platform, so unlike an API key (models/accounts/apikeys.py: only its
hash is kept) they are stored as given; like a key they are never logged and never shown back whole:
every view masks a secret to its last 4 characters.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError
from models.admin.rows import find_by_name_or_id, get_campaign
from models.choices import CONNECTION_STATUSES, PLATFORMS
from models.conversions.platforms.events import Answer, Connection, event_id
from models.conversions.platforms.sending import PLATFORMS as CLIENTS
from models.conversions.platforms.sending import PlatformConfig, send_test_event
from models.reporting.timerange import localise_times, zone
from models.store.database import write_tx
from models.store.deliveries import DeliveryStore
from models.tables.campaign import Campaign
from models.tables.conversion import PlatformConnection, PostbackDelivery
from models.tables.source import TrafficSource

MAX_NAME = 100
MAX_VALUE = 4000
MAX_EVENT_NAME = 100
REMOVED = "removed"  # Beside CONNECTION_STATUSES: set by remove_connection only, never undone.
NEVER_SENT = ("rejected", "trash")  # A refusal is no event an ad platform should optimise on.
SENDABLE = ("lead", "sale", "rebill")
_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_ ]*")


@dataclass(frozen=True)
class ConnectionView:
    """What is shown of a connection: its credentials masked."""

    id: int
    name: str
    platform: str
    campaign: str  # The campaign's alias, or '' for a source's connection.
    source: str  # The traffic source's name, or ''.
    credentials: dict[str, str]  # Secrets masked.
    events: dict[str, str]
    test_event_code: str
    status: str
    created_at: int
    updated_at: int

    def fields(self) -> dict[str, Any]:
        return dict(self.__dict__)


def mask(value: str) -> str:
    """A secret as shown: its last 4 characters (none of a short one)."""
    return "****" + value[-4:] if len(value) >= 12 else "****"


def masked(platform: str, credentials: dict[str, str]) -> dict[str, str]:
    return masked_secrets(CLIENTS[platform].SECRETS, credentials)


def masked_secrets(secrets, credentials: dict[str, str]) -> dict[str, str]:
    """Credentials as shown: the secrets among them masked (platform and spend connections alike)."""
    return {key: mask(value) if key in secrets else value for key, value in credentials.items()}


def _now() -> int:
    return int(time.time() * 1000)


def _platform(value: str) -> str:
    platform = value.strip().lower()
    if platform not in PLATFORMS:
        raise AdminError(f"The platform must be one of {', '.join(PLATFORMS)}, not {value!r}.")
    return platform


def parse_events(expressions: list[str] | dict[str, str]) -> dict[str, str]:
    """`lead=Lead` expressions (or a dict) as {status: event name}; rejected and trash refused."""
    pairs = (
        expressions.items() if isinstance(expressions, dict) else (e.partition("=")[::2] for e in expressions)
    )
    events: dict[str, str] = {}
    for status, name in pairs:
        status, name = str(status).strip().lower(), str(name).strip()
        if status in NEVER_SENT:
            raise AdminError(f"A {status} conversion is never sent to an ad platform.")
        if status not in SENDABLE:
            raise AdminError(f"{status!r} is not a status an event is sent for ({', '.join(SENDABLE)}).")
        if not _EVENT_NAME.fullmatch(name) or len(name) > MAX_EVENT_NAME:
            raise AdminError(
                f"{name!r} is not an event name such as Purchase (letters, digits, '_', spaces)."
            )
        events[status] = name
    return events


def _credentials(
    platform: str, given: dict[str, str], before: dict[str, str] | None = None
) -> dict[str, str]:
    credentials = checked_credentials(CLIENTS[platform], f"A {platform} connection", given, before)
    if platform == "google_ads":
        for key in ("customer_id", "login_customer_id"):
            if credentials.get(key) and not credentials[key].replace("-", "").isdigit():
                raise AdminError(f"The Google Ads {key} is the account's number, such as 123-456-7890.")
    return credentials


def checked_credentials(
    client: Any, what: str, given: dict[str, str], before: dict[str, str] | None = None
) -> dict[str, str]:
    """`before` with `given` applied (an empty value removes a key), each checked against the client's
    CREDENTIALS and REQUIRED; `what` names the connection in the refusals ("A meta connection")."""
    credentials = dict(before or {})
    for key, value in given.items():
        if key not in client.CREDENTIALS:
            raise AdminError(f"{what} has no credential {key!r} ({', '.join(client.CREDENTIALS)}).")
        value = (value or "").strip()
        if len(value) > MAX_VALUE or any(ord(c) < 32 for c in value):
            raise AdminError(f"The {key} is not usable: at most {MAX_VALUE} printable characters.")
        if value:
            credentials[key] = value
        else:
            credentials.pop(key, None)
    missing = [key for key in client.REQUIRED if not credentials.get(key)]
    if missing:
        raise AdminError(f"{what} needs its {', '.join(missing)}.")
    return credentials


def _view(row: PlatformConnection) -> ConnectionView:
    campaign = Campaign.get_or_none(Campaign.id == row.campaign_id) if row.campaign_id else None
    source = TrafficSource.get_or_none(TrafficSource.id == row.source_id) if row.source_id else None
    return ConnectionView(
        row.id,
        row.name,
        row.platform,
        campaign.alias if campaign else "",
        source.name if source else "",
        masked(row.platform, json.loads(row.credentials)),
        json.loads(row.events),
        row.test_event_code,
        row.status,
        row.created_at,
        row.updated_at,
    )


def _row(ref: str | int) -> PlatformConnection:
    return find_by_name_or_id(PlatformConnection, PlatformConnection.name, ref, "platform connection")


def _live_row(ref: str | int) -> PlatformConnection:
    row = _row(ref)
    if row.status == REMOVED:
        raise AdminError(f"The connection {row.name!r} is removed: create a new one.")
    return row


def create_connection(
    db: Database,
    name: str,
    platform: str,
    *,
    campaign: str | None = None,
    source: str | None = None,
    credentials: dict[str, str],
    events: list[str] | dict[str, str] | None = None,
    test_event_code: str = "",
    actor: Principal = CLI,
) -> ConnectionView:
    """A new active connection for one campaign or one traffic source."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise AdminError(f"A connection's name must be 1 to {MAX_NAME} characters long.")
    platform = _platform(platform)
    if bool(campaign) == bool(source):
        raise AdminError("A connection is for one campaign or one traffic source: name exactly one.")
    mapping = parse_events(events) if events else dict(CLIENTS[platform].DEFAULT_EVENTS)
    if not mapping:
        raise AdminError("A connection needs at least one status to send, such as sale=Purchase.")
    secrets = _credentials(platform, credentials)
    code = test_event_code.strip()
    if len(code) > MAX_NAME:
        raise AdminError(f"The test event code must be at most {MAX_NAME} characters long.")
    with write_tx(db):
        campaign_id = get_campaign(db, campaign).id if campaign else None
        source_id = (
            find_by_name_or_id(TrafficSource, TrafficSource.name, source, "traffic source").id
            if source
            else None
        )
        if PlatformConnection.get_or_none(PlatformConnection.name == name) is not None:
            raise AdminConflict(f"There is a connection named {name!r} already.")
        now = _now()
        row = PlatformConnection.create(
            name=name,
            platform=platform,
            campaign_id=campaign_id,
            source_id=source_id,
            credentials=json.dumps(secrets),
            events=json.dumps(mapping),
            test_event_code=code,
            status="active",
            created_at=now,
            updated_at=now,
        )
        view = _view(row)
        record_change(db, actor, "platform_connection", row.id, "create", None, view.fields())
    return view


def change_connection(
    db: Database,
    ref: str | int,
    *,
    credentials: dict[str, str] | None = None,
    events: list[str] | dict[str, str] | None = None,
    test_event_code: str | None = None,
    actor: Principal = CLI,
) -> ConnectionView:
    """New credentials (an empty value removes an optional one), events or test event code."""
    with write_tx(db):
        row = _live_row(ref)
        before = _view(row)
        if credentials:
            row.credentials = json.dumps(_credentials(row.platform, credentials, json.loads(row.credentials)))
        if events:
            row.events = json.dumps(parse_events(events))
        if test_event_code is not None:
            row.test_event_code = test_event_code.strip()[:MAX_NAME]
        row.updated_at = _now()
        row.save()
        after = _view(row)
        record_change(db, actor, "platform_connection", row.id, "update", before.fields(), after.fields())
    return after


def set_connection_status(
    db: Database, ref: str | int, status: str, *, actor: Principal = CLI
) -> ConnectionView:
    """Pause (nothing new is queued; queued events wait) or resume (they are due at once)."""
    if status not in CONNECTION_STATUSES:
        raise AdminError(f"A connection's status is one of {', '.join(CONNECTION_STATUSES)}, not {status!r}.")
    with write_tx(db):
        row = _live_row(ref)
        before = row.status
        now = _now()
        if before != status:
            row.status, row.updated_at = status, now
            row.save()
            if status == "active":
                DeliveryStore(db.connection()).resume(row.id, now)
            record_change(
                db, actor, "platform_connection", row.id, "update", {"status": before}, {"status": status}
            )
    return _view(row)


def remove_connection(db: Database, ref: str | int, *, actor: Principal = CLI) -> ConnectionView:
    """Stop for good: nothing new is queued, queued events fail at their next attempt; the connection
    stays as `removed` with its event log, and lets go of its traffic source (which may then be deleted)."""
    with write_tx(db):
        row = _row(ref)
        if row.status == REMOVED:
            raise AdminError(f"The connection {row.name!r} is removed already.")
        before = row.status
        row.status, row.updated_at = REMOVED, _now()
        row.save()
        record_change(
            db, actor, "platform_connection", row.id, "delete", {"status": before}, {"status": REMOVED}
        )
    return _view(row)


def connections_of_source(db: Database, source_id: int) -> list[str]:
    """The names of the connections (not removed) that send the source's conversions."""
    query = PlatformConnection.select(PlatformConnection.name).where(
        (PlatformConnection.source_id == source_id) & (PlatformConnection.status != REMOVED)
    )
    return [row.name for row in query.order_by(PlatformConnection.name)]


def release_source(db: Database, source_id: int) -> None:
    """Removed connections let go of a source being deleted (in the caller's transaction)."""
    PlatformConnection.update(source_id=None).where(PlatformConnection.source_id == source_id).execute()


def get_connection(db: Database, ref: str | int) -> ConnectionView:
    return _view(_row(ref))


def list_connections(db: Database) -> list[ConnectionView]:
    return [_view(row) for row in PlatformConnection.select().order_by(PlatformConnection.id)]


def test_connection(db: Database, ref: str | int, config: PlatformConfig) -> Answer:
    """Send one made-up event now (Meta's goes to Test Events when the connection has a test code)."""
    row = _live_row(ref)
    connection = Connection.from_row(
        (
            row.id,
            row.name,
            row.platform,
            row.campaign_id,
            row.source_id,
            row.credentials,
            row.events,
            row.test_event_code,
            row.status,
        )
    )
    return send_test_event(connection, config)


LOG_COLUMNS = (
    "id",
    "conversion_id",
    "status",
    "state",
    "attempts",
    "response_code",
    "error",
    "url",
    "created_at",
    "updated_at",
)


def connection_log(
    db: Database, ref: str | int, *, state: str | None = None, limit: int = 100, timezone: str = "UTC"
) -> list[dict[str, Any]]:
    """The connection's events, newest first: each one's event id, state and the platform's last answer;
    times as ISO text in `timezone`."""
    row = _row(ref)
    query = PostbackDelivery.select(*(getattr(PostbackDelivery, c) for c in LOG_COLUMNS)).where(
        PostbackDelivery.connection_id == row.id
    )
    if state:
        query = query.where(PostbackDelivery.state == state)
    rows: list[dict[str, Any]] = list(
        query.order_by(PostbackDelivery.id.desc()).limit(limit).dicts()  # type: ignore[arg-type]  # peewee's stubs.
    )
    rows = [item | {"event_id": event_id(item["conversion_id"], item["status"])} for item in rows]
    return localise_times(rows, ("created_at", "updated_at"), zone(timezone))
