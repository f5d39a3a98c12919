"""audit on SQLite: what differs from PostgreSQL (models/store/postgres/audit.py); the rest is
models/store/audit.py's."""

from __future__ import annotations

from models.store import audit as base


class AuditStore(base.AuditStore):
    __slots__ = ()
    dialect = "sqlite"
    # Newest first; a filter given as NULL is no filter. `id < ?7` is the page cursor (ids only grow).
    SQL_ENTRIES = (
        f"SELECT {base.AUDIT_COLUMNS} FROM audit_log "
        "WHERE created_at >= ?1 AND (?5 IS NULL OR created_at < ?5) "
        "AND (?2 IS NULL OR entity = ?2) AND (?3 IS NULL OR entity_id = ?3) "
        "AND (?6 IS NULL OR actor = ?6 COLLATE NOCASE) AND (?7 IS NULL OR id < ?7) ORDER BY id DESC LIMIT ?4"
    )
    SQL_SORTED_ENTRIES = SQL_ENTRIES.replace(
        "ORDER BY id DESC LIMIT ?4", "ORDER BY {order} LIMIT ?4 OFFSET ?8"
    )
    SQL_SORT_TERMS = {
        "when": ("created_at", "id"),
        "who": ("actor COLLATE NOCASE", "actor"),
        "what": ("action", "entity", "entity_id"),
    }
    SQL_ACTORS = "SELECT DISTINCT actor FROM audit_log ORDER BY actor COLLATE NOCASE, actor"  # Ties by bytes.
    SQL_ENTITIES = "SELECT DISTINCT entity FROM audit_log ORDER BY entity"  # From audit_log_entity.
