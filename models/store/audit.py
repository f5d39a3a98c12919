"""The audit log: every statement on audit_log. Entries are only ever added (models/accounts/audit.py
says what goes in them); writes join the caller's transaction, the change's own."""

from __future__ import annotations

from models.store.rows import Store

AUDIT_COLUMNS = "id, created_at, actor_user_id, actor, entity, entity_id, action, old_values, new_values"


class AuditStore(Store):
    """The audit_log rows of one connection."""

    SQL_INSERT = (
        "INSERT INTO audit_log (created_at, actor_user_id, actor, entity, entity_id, action, old_values, "
        "new_values) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    __slots__ = ()

    def insert(
        self,
        created_at: int,
        actor_user_id: int | None,
        actor: str,
        entity: str,
        entity_id: int | None,
        action: str,
        old_values: str,
        new_values: str,
    ) -> None:
        self.conn.execute(
            self.SQL_INSERT,
            (created_at, actor_user_id, actor, entity, entity_id, action, old_values, new_values),
        ).close()

    def entries(
        self,
        entity: str | None,
        entity_id: int | None,
        since_ms: int,
        limit: int,
        *,
        until_ms: int | None = None,
        actor: str | None = None,
        before_id: int | None = None,
    ) -> list[tuple]:
        """AUDIT_COLUMNS of the newest `limit` entries in [since_ms, until_ms) by `actor` with ids
        below `before_id`, newest first."""
        parameters = (since_ms, entity, entity_id, limit, until_ms, actor, before_id)
        return self.conn.execute(self.SQL_ENTRIES, parameters).fetchall()

    def actors(self) -> list[str]:
        """Every name the log has entries by."""
        return [actor for (actor,) in self.conn.execute(self.SQL_ACTORS).fetchall()]

    def entities(self) -> list[str]:
        """Every entity type the log has entries on."""
        return [entity for (entity,) in self.conn.execute(self.SQL_ENTITIES).fetchall()]

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_ENTRIES: str
    SQL_ACTORS: str
    SQL_ENTITIES: str
