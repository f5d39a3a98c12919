"""The audit log: who changed what, when, from what to what.

Every change the services make (campaigns, streams, offers in models/admin/services.py; users,
shares and API keys here) calls `record_change` inside the change's own write transaction, so an
entry exists exactly when its change does. An entry keeps the changed fields only, before
(`old_values`) and after (`new_values`), as JSON; a creation has no old values, a removal no new
ones. Secrets never go in: a password change is logged as the action `passwd` with no values.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.accounts.errors import AccountError
from models.accounts.principal import Principal
from models.store.audit import AuditStore

# The entry names the row already (entity_id); the times move on every save, so a diff that only
# they make is no change.
UNAUDITED_FIELDS = frozenset({"id", "updated_at", "created_at"})


@dataclass(frozen=True)
class AuditEntry:
    id: int
    created_at: int  # Unix ms.
    actor_user_id: int | None
    actor: str  # The user's name then, or `cli` / `install key`.
    entity: str
    entity_id: int | None
    action: str
    old_values: dict[str, Any]
    new_values: dict[str, Any]


def changed_fields(
    old: dict[str, Any] | None, new: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(old values, new values) of the fields that differ between two snapshots (None: absent)."""
    old, new = old or {}, new or {}
    names = [name for name in {**old, **new} if name not in UNAUDITED_FIELDS]
    changed = [name for name in names if old.get(name) != new.get(name) or (name in old) != (name in new)]
    return (
        {name: old[name] for name in changed if name in old},
        {name: new[name] for name in changed if name in new},
    )


def record_change(
    db: Database,
    actor: Principal,
    entity: str,
    entity_id: int | None,
    action: str,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    *,
    clock=time.time,
) -> bool:
    """Log `actor`'s `action` on an entity, from snapshot `old` to snapshot `new` (whole snapshots:
    only the fields that differ are kept). Call it inside the change's write_tx. An update that
    changed nothing is not logged; returns whether an entry was written."""
    old_values, new_values = changed_fields(old, new)
    if action == "update" and not old_values and not new_values:
        return False
    AuditStore(db.connection()).insert(
        int(clock() * 1000),
        actor.user_id,
        actor.name,
        entity,
        entity_id,
        action,
        json.dumps(old_values, sort_keys=True, default=str),
        json.dumps(new_values, sort_keys=True, default=str),
    )
    return True


def parse_entity(text: str) -> tuple[str, int | None]:
    """`campaign` or `campaign:3` as (entity, id or None)."""
    entity, _, ref = text.partition(":")
    if not entity or (ref and not ref.isdigit()):
        raise AccountError(f"{text!r} is not an entity type, or TYPE:ID such as campaign:3.")
    return entity, int(ref) if ref else None


def list_audit(
    db: Database,
    *,
    entity: str | None = None,
    entity_id: int | None = None,
    since_ms: int = 0,
    until_ms: int | None = None,
    actor: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[AuditEntry]:
    """The newest `limit` entries in [since_ms, until_ms), newest first, of one entity type (and id),
    by one actor (their name, any case), older than entry `before_id` (the next page's cursor)."""
    rows = AuditStore(db.connection()).entries(
        entity, entity_id, since_ms, limit, until_ms=until_ms, actor=actor, before_id=before_id
    )
    return [
        AuditEntry(*row[:7], json.loads(row[7]), json.loads(row[8]))  # type: ignore[call-arg]  # mypy cannot count a row's slice.
        for row in rows
    ]


def list_audit_sorted(
    db: Database,
    order: Sequence[tuple[str, bool]],
    *,
    offset: int = 0,
    limit: int = 50,
    **filters: Any,
) -> list[AuditEntry]:
    """As list_audit (its filters), sorted by `order` ((when, who or what; is descending), two at most;
    equal entries newest first), `limit` of them from the `offset`-th."""
    rows = AuditStore(db.connection()).sorted_entries(
        filters.pop("entity", None),
        filters.pop("entity_id", None),
        filters.pop("since_ms", 0),
        limit,
        order=order,
        offset=offset,
        **filters,
    )
    return [
        AuditEntry(*row[:7], json.loads(row[7]), json.loads(row[8]))  # type: ignore[call-arg]  # mypy cannot count a row's slice.
        for row in rows
    ]


def newest_audit_id(db: Database) -> int | None:
    return AuditStore(db.connection()).newest_id()


def audit_actors(db: Database) -> list[str]:
    """The names the log has entries by (users, removed ones too, `cli`, `install key`)."""
    return AuditStore(db.connection()).actors()


def audit_entities(db: Database) -> list[str]:
    """The entity types the log has entries on (campaign, stream, offer, user, api_key, ...)."""
    return AuditStore(db.connection()).entities()


AUDIT_COLUMNS = ["id", "created_at", "actor", "entity", "entity_id", "action", "old", "new"]


def audit_rows(
    db: Database,
    *,
    entity: str | None = None,
    actor: str | None = None,
    since: str | None = None,
    timezone: str = "UTC",
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The newest entries as the CLI and the API list them: `entity` as TYPE or TYPE:ID, by `actor`,
    `since` a local date or date-time in `timezone` (times shown in it too), `limit` rows at most."""
    from models.reporting.timerange import MAX_LOG_ROWS, TimeRangeError, local_instant, local_iso, zone

    tz = zone(timezone)
    if not 1 <= limit <= MAX_LOG_ROWS:
        raise TimeRangeError(f"The limit must be between 1 and {MAX_LOG_ROWS:,}.")
    kind, entity_id = parse_entity(entity) if entity else (None, None)
    since_ms = local_instant(since, tz, is_end=False) if since else 0
    return [
        {
            "id": entry.id,
            "created_at": local_iso(entry.created_at, tz),
            "actor": entry.actor,
            "actor_user_id": entry.actor_user_id,
            "entity": entry.entity,
            "entity_id": entry.entity_id,
            "action": entry.action,
            "old": entry.old_values,
            "new": entry.new_values,
        }
        for entry in list_audit(
            db, entity=kind, entity_id=entity_id, since_ms=since_ms, actor=actor or None, limit=limit
        )
    ]
