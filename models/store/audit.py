"""The audit log: every statement on audit_log. Entries are only ever added (models/accounts/audit.py
says what goes in them); writes join the caller's transaction, the change's own."""

from __future__ import annotations

from collections.abc import Sequence

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

    def sorted_entries(
        self,
        entity: str | None,
        entity_id: int | None,
        since_ms: int,
        limit: int,
        *,
        order: Sequence[tuple[str, bool]],
        offset: int = 0,
        until_ms: int | None = None,
        actor: str | None = None,
        before_id: int | None = None,
    ) -> list[tuple]:
        """As `entries`, in `order` ((a SQL_SORT_TERMS key, is descending), first key first; equal
        entries newest first), `limit` of them from the `offset`-th: the panel's sorted log, paged by
        offset below a fixed `before_id` (entries are only ever added) so pages neither repeat nor skip."""
        direction = {False: "ASC", True: "DESC"}
        terms = [
            f"{term} {direction[is_descending]} NULLS LAST"
            for column, is_descending in order
            for term in self.SQL_SORT_TERMS[column]
        ]
        statement = self.SQL_SORTED_ENTRIES.format(order=", ".join([*terms, "id DESC"]))
        parameters = (since_ms, entity, entity_id, limit, until_ms, actor, before_id, offset)
        return self.conn.execute(statement, parameters).fetchall()

    def newest_id(self) -> int | None:
        (newest,) = self.conn.execute(self.SQL_NEWEST_ID).fetchone()
        return newest

    SQL_NEWEST_ID = "SELECT max(id) FROM audit_log"

    def actors(self) -> list[str]:
        """Every name the log has entries by."""
        return [actor for (actor,) in self.conn.execute(self.SQL_ACTORS).fetchall()]

    def entities(self) -> list[str]:
        """Every entity type the log has entries on."""
        return [entity for (entity,) in self.conn.execute(self.SQL_ENTITIES).fetchall()]

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_ENTRIES: str
    SQL_SORTED_ENTRIES: str  # SQL_ENTRIES's filters, `{order}` filled from SQL_SORT_TERMS only.
    SQL_SORT_TERMS: dict[str, tuple[str, ...]]  # A sortable column -> what it orders by.
    SQL_ACTORS: str
    SQL_ENTITIES: str
