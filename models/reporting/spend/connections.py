"""Spend connections: create, list, show (credentials masked), change, map ids, pause, resume, remove,
sync now, read the sync log. The library the CLI, the admin API and the panel call; every error is an
AdminError with one sentence; every change is audited (entity `spend_connection`), credentials masked.

A spend connection is its own table rather than a "spend" role of a conversion connection
(models/conversions/platforms/connections.py): it reads an ad account (Meta's act_ id, TikTok's
advertiser, a PropellerAds token) where a conversion connection writes to a pixel; it belongs to a
traffic source and a click parameter where a conversion connection belongs to a campaign; it has id
mappings and a sync log where the other has events and the outbound queue. The secret masking is that
module's, shared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError
from models.admin.rows import find_by_name_or_id, get_campaign
from models.choices import CONNECTION_STATUSES, SPEND_PLATFORMS
from models.conversions.platforms.connections import checked_credentials, masked_secrets
from models.reporting.currency import CurrencyError, check_code
from models.reporting.spend.sync import CLIENTS, SpendConfig, check_may_sync, sync_connection
from models.reporting.timerange import TimeRangeError, localise_times, zone
from models.routing.sources import loads, slot_of
from models.store.database import write_tx
from models.tables.campaign import Campaign
from models.tables.source import TrafficSource
from models.tables.spend import SpendConnection, SpendMapping, SpendSync

MAX_NAME = 100
MAX_ID = 200
REMOVED = "removed"


@dataclass(frozen=True)
class SpendView:
    """What is shown of a spend connection: its credentials masked, its mappings, its last run."""

    id: int
    name: str
    platform: str
    source: str
    parameter: str
    credentials: dict[str, str]
    currency: str
    timezone: str
    status: str
    mappings: dict[str, str]  # The platform's id -> the campaign's alias.
    last_sync: dict[str, Any] | None
    created_at: int
    updated_at: int
    # The platform's Retry-After: the periodic sync leaves it alone until then (ISO, UTC); None for no wait.
    waits_until: str | None = None

    def fields(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _now() -> int:
    return int(time.time() * 1000)


def _masked(platform: str, credentials: dict[str, str]) -> dict[str, str]:
    return masked_secrets(CLIENTS[platform].SECRETS, credentials)


def _mappings(connection_id: int) -> dict[str, str]:
    query = (
        SpendMapping.select(SpendMapping.external_id, Campaign.alias)
        .join(Campaign, on=(SpendMapping.campaign_id == Campaign.id))
        .where(SpendMapping.connection_id == connection_id)
        .order_by(SpendMapping.external_id)
    )
    return dict(query.tuples())  # type: ignore[arg-type]  # peewee's stubs.


LOG_COLUMNS = (
    "id",
    "state",
    "since",
    "until",
    "rows",
    "written",
    "unchanged",
    "removed",
    "skipped",
    "note",
    "error",
    "started_at",
    "finished_at",
)


def _view(row: SpendConnection) -> SpendView:
    source = TrafficSource.get_or_none(TrafficSource.id == row.source_id)
    last = (
        SpendSync.select()
        .where(SpendSync.connection_id == row.id)
        .order_by(SpendSync.id.desc())
        .dicts()
        .first()
    )
    return SpendView(
        row.id,
        row.name,
        row.platform,
        source.name if source else "",
        row.parameter,
        _masked(row.platform, json.loads(row.credentials)),
        row.currency,
        row.timezone,
        row.status,
        _mappings(row.id),
        {key: last[key] for key in LOG_COLUMNS} if last else None,
        row.created_at,
        row.updated_at,
        _waits_until(row.retry_after_at),
    )


def _waits_until(retry_after_at: int | None, now_ms: int | None = None) -> str | None:
    """The time a platform's Retry-After keeps the periodic sync off, if it is still to come."""
    if retry_after_at is None or retry_after_at <= (_now() if now_ms is None else now_ms):
        return None
    return datetime.fromtimestamp(retry_after_at / 1000, UTC).isoformat(timespec="seconds")


def _platform(value: str) -> str:
    platform = value.strip().lower()
    if platform not in SPEND_PLATFORMS:
        raise AdminError(f"Spend is pulled from {', '.join(SPEND_PLATFORMS)}, not {value!r}.")
    return platform


def _credentials(
    platform: str, given: dict[str, str], before: dict[str, str] | None = None
) -> dict[str, str]:
    client = CLIENTS[platform]
    credentials = checked_credentials(client, f"A {platform} spend connection", given, before)
    problem = client.check(credentials)
    if problem:
        raise AdminError(problem)
    return credentials


def _parameter(source: TrafficSource, value: str) -> str:
    """The click parameter the rows' ad or zone ids are in: one the source names, or a click column."""
    from models.store.costs import COST_COLUMNS

    parameter = value.strip()
    if parameter and parameter not in COST_COLUMNS and parameter not in slot_of(loads(source.parameters)):
        raise AdminError(
            f"{parameter[:40]!r} is neither a parameter of traffic source {source.name!r} nor sub_id_1 … "
            "sub_id_30; name the one holding the ad or zone id, or none to pull spend per campaign."
        )
    return parameter


def _currency(value: str) -> str:
    if not value.strip():
        return ""
    try:
        return check_code(value)
    except CurrencyError as exc:
        raise AdminError(str(exc)) from None


def _timezone(value: str) -> str:
    try:
        return zone(value.strip() or "UTC").key
    except TimeRangeError as exc:
        raise AdminError(str(exc)) from None


def _row(ref: str | int) -> SpendConnection:
    return find_by_name_or_id(SpendConnection, SpendConnection.name, ref, "spend connection")


def _live_row(ref: str | int) -> SpendConnection:
    row = _row(ref)
    if row.status == REMOVED:
        raise AdminError(f"The spend connection {row.name!r} is removed: create a new one.")
    return row


def create_spend_connection(
    db: Database,
    name: str,
    platform: str,
    *,
    source: str,
    credentials: dict[str, str],
    parameter: str = "",
    currency: str = "",
    timezone: str = "UTC",
    actor: Principal = CLI,
) -> SpendView:
    """A new active connection reading one ad account's spend for one traffic source's campaigns."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise AdminError(f"A spend connection's name must be 1 to {MAX_NAME} characters long.")
    platform = _platform(platform)
    secrets = _credentials(platform, credentials)
    if not source:
        raise AdminError("A spend connection is for one traffic source: name it.")
    with write_tx(db):
        source_row = find_by_name_or_id(TrafficSource, TrafficSource.name, source, "traffic source")
        if SpendConnection.get_or_none(SpendConnection.name == name) is not None:
            raise AdminConflict(f"There is a spend connection named {name!r} already.")
        now = _now()
        row = SpendConnection.create(
            name=name,
            platform=platform,
            source_id=source_row.id,
            parameter=_parameter(source_row, parameter),
            credentials=json.dumps(secrets),
            currency=_currency(currency),
            timezone=_timezone(timezone),
            created_at=now,
            updated_at=now,
        )
        view = _view(row)
        record_change(db, actor, "spend_connection", row.id, "create", None, view.fields())
    return view


def change_spend_connection(
    db: Database,
    ref: str | int,
    *,
    credentials: dict[str, str] | None = None,
    parameter: str | None = None,
    currency: str | None = None,
    timezone: str | None = None,
    actor: Principal = CLI,
) -> SpendView:
    """New credentials (an empty value removes an optional one), parameter, currency or timezone."""
    with write_tx(db):
        row = _live_row(ref)
        before = _view(row)
        if credentials:
            row.credentials = json.dumps(_credentials(row.platform, credentials, json.loads(row.credentials)))
        if parameter is not None:
            row.parameter = _parameter(TrafficSource.get_by_id(row.source_id), parameter)
        if currency is not None:
            row.currency = _currency(currency)
        if timezone is not None:
            row.timezone = _timezone(timezone)
        row.updated_at = _now()
        row.save()
        after = _view(row)
        record_change(db, actor, "spend_connection", row.id, "update", before.fields(), after.fields())
    return after


def map_ids(db: Database, ref: str | int, pairs: dict[str, str], *, actor: Principal = CLI) -> SpendView:
    """Map each of the platform's campaign, ad set or ad ids onto a Lanner campaign (alias or id) of the
    connection's traffic source; an empty campaign removes the id's mapping."""
    with write_tx(db):
        row = _live_row(ref)
        before = _mappings(row.id)
        for external, campaign in pairs.items():
            external = str(external).strip()
            if not external or len(external) > MAX_ID or any(ord(c) < 32 for c in external):
                raise AdminError(
                    f"A platform's id is 1 to {MAX_ID} printable characters, not {external[:40]!r}."
                )
            query = SpendMapping.delete().where(
                (SpendMapping.connection_id == row.id) & (SpendMapping.external_id == external)
            )
            query.execute()
            if not str(campaign or "").strip():
                continue
            target = get_campaign(db, str(campaign).strip())
            if target.source_id != row.source_id:
                raise AdminError(
                    f"Campaign {target.alias!r} is not of the connection's traffic source; map ids onto "
                    "campaigns of that source only."
                )
            SpendMapping.create(connection_id=row.id, external_id=external, campaign_id=target.id)
        row.updated_at = _now()
        row.save()
        record_change(
            db,
            actor,
            "spend_connection",
            row.id,
            "update",
            {"mappings": before},
            {"mappings": _mappings(row.id)},
        )
    return _view(row)


def parse_mappings(expressions: list[str]) -> dict[str, str]:
    """`PLATFORM_ID=CAMPAIGN` expressions (`--map`, the panel's lines) as a dict."""
    pairs = {}
    for expression in expressions:
        external, separator, campaign = expression.partition("=")
        if not separator or not external.strip():
            raise AdminError(f"{expression[:60]!r} is not a mapping such as 23851234567890123=summer-sale.")
        pairs[external.strip()] = campaign.strip()
    return pairs


def set_spend_status(db: Database, ref: str | int, status: str, *, actor: Principal = CLI) -> SpendView:
    """Pause (no sync runs; the costs it wrote stay) or resume."""
    if status not in CONNECTION_STATUSES:
        raise AdminError(
            f"A spend connection's status is one of {', '.join(CONNECTION_STATUSES)}, not {status!r}."
        )
    with write_tx(db):
        row = _live_row(ref)
        if row.status != status:
            before = row.status
            row.status, row.updated_at = status, _now()
            row.save()
            record_change(
                db, actor, "spend_connection", row.id, "update", {"status": before}, {"status": status}
            )
    return _view(row)


def remove_spend_connection(db: Database, ref: str | int, *, actor: Principal = CLI) -> SpendView:
    """Stop for good; the costs it wrote stay (as costs set), its log too."""
    with write_tx(db):
        row = _row(ref)
        if row.status == REMOVED:
            raise AdminError(f"The spend connection {row.name!r} is removed already.")
        before = row.status
        row.status, row.updated_at = REMOVED, _now()
        row.save()
        record_change(
            db, actor, "spend_connection", row.id, "delete", {"status": before}, {"status": REMOVED}
        )
    return _view(row)


def spend_connections_of_source(db: Database, source_id: int) -> list[str]:
    """The names of the spend connections (not removed) that cost the source's campaigns."""
    query = SpendConnection.select(SpendConnection.name).where(
        (SpendConnection.source_id == source_id) & (SpendConnection.status != REMOVED)
    )
    return [row.name for row in query.order_by(SpendConnection.name)]


def release_spend_source(db: Database, source_id: int) -> None:
    """Removed spend connections let go of a source being deleted (in the caller's transaction)."""
    SpendConnection.update(source_id=None).where(SpendConnection.source_id == source_id).execute()


def get_spend_connection(db: Database, ref: str | int) -> SpendView:
    return _view(_row(ref))


def list_spend_connections(db: Database) -> list[SpendView]:
    return [_view(row) for row in SpendConnection.select().order_by(SpendConnection.id)]


def sync_now(db: Database, ref: str | int, config: SpendConfig, *, actor: Principal = CLI) -> dict[str, Any]:
    """Run the connection's sync now; its log row (a platform's refusal is a `failed` run, not an error)."""
    row = _live_row(ref)
    run = sync_connection(db, row.id, config, actor=actor)
    return {key: getattr(run, key) for key in LOG_COLUMNS}


def queue_sync(
    db: Database, ref: str | int, enqueue: Callable[[int, str], None], *, actor: Principal = CLI
) -> dict[str, Any]:
    """ "Sync now" from the panel or the API: the worker's `sync_spend_connection` task runs it (a platform
    may take its 30 s to answer; no request waits for it), and its run shows in the log when it lands.
    Refused at once (AdminConflict) when the connection is paused or removed or a run of it is under way,
    as the run itself would be."""
    row = _live_row(ref)
    check_may_sync(row, int(time.time() * 1000))
    enqueue(row.id, actor.name)
    return {"state": "queued", "id": row.id, "name": row.name}


def sync_queued(
    db: Database, connection_id: int, actor_name: str, config: SpendConfig
) -> dict[str, Any] | None:
    """The `sync_spend_connection` task's work: the queued sync, as `actor_name`; its log row, or None
    when it may not run any more (paused, removed or running since it was queued: nothing to do)."""
    actor = Principal(None, actor_name, "admin", True, False)
    try:
        run = sync_connection(db, connection_id, config, actor=actor)
    except AdminError:
        return None
    return {key: getattr(run, key) for key in LOG_COLUMNS}


def sync_active(
    db: Database, config: SpendConfig, *, actor: Principal, clock=time.time
) -> list[dict[str, Any]]:
    """The periodic task's round: every active connection's sync, one after the other, but those whose
    platform asked to wait (Retry-After) until a time not come yet: they have no run this round."""
    now_ms = int(clock() * 1000)
    due = (SpendConnection.status == "active") & (
        SpendConnection.retry_after_at.is_null() | (SpendConnection.retry_after_at <= now_ms)
    )
    ids = [r.id for r in SpendConnection.select(SpendConnection.id).where(due)]
    runs = []
    for connection_id in ids:
        try:
            run = sync_connection(db, connection_id, config, actor=actor, clock=clock)
        except AdminError:
            continue  # Paused since, or a "sync now" of it is running: its own run counts.
        runs.append(
            {"name": SpendConnection.get_by_id(connection_id).name}
            | {k: getattr(run, k) for k in LOG_COLUMNS}
        )
    return runs


def sync_log(db: Database, ref: str | int, *, limit: int = 50, timezone: str = "UTC") -> list[dict[str, Any]]:
    """The connection's runs, newest first; times as ISO text in `timezone`."""
    row = _row(ref)
    query = SpendSync.select(*(getattr(SpendSync, c) for c in LOG_COLUMNS)).where(
        SpendSync.connection_id == row.id
    )
    rows: list[dict[str, Any]] = list(query.order_by(SpendSync.id.desc()).limit(limit).dicts())  # type: ignore[arg-type]
    return localise_times(rows, ("started_at", "finished_at"), zone(timezone))
