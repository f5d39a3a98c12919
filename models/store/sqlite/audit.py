"""The audit log: every statement on audit_log. Entries are only ever added (models/accounts/audit.py
says what goes in them); writes join the caller's transaction, the change's own."""

from __future__ import annotations

from models.store.sqlite.rows import Store

AUDIT_COLUMNS = "id, created_at, actor_user_id, actor, entity, entity_id, action, old_values, new_values"


class AuditStore(Store):
    """The audit_log rows of one connection."""

    SQL_INSERT = (
        "INSERT INTO audit_log (created_at, actor_user_id, actor, entity, entity_id, action, old_values, "
        "new_values) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    # Newest first; a filter given as NULL is no filter. `id < ?7` is the page cursor (ids only grow).
    SQL_ENTRIES = (
        f"SELECT {AUDIT_COLUMNS} FROM audit_log WHERE created_at >= ?1 AND (?5 IS NULL OR created_at < ?5) "
        "AND (?2 IS NULL OR entity = ?2) AND (?3 IS NULL OR entity_id = ?3) "
        "AND (?6 IS NULL OR actor = ?6 COLLATE NOCASE) AND (?7 IS NULL OR id < ?7) ORDER BY id DESC LIMIT ?4"
    )
    SQL_ACTORS = "SELECT DISTINCT actor FROM audit_log ORDER BY actor COLLATE NOCASE, actor"  # Ties by bytes.
    SQL_ENTITIES = "SELECT DISTINCT entity FROM audit_log ORDER BY entity"  # From audit_log_entity.

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
