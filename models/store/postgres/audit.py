"""audit on PostgreSQL: what differs from SQLite (models/store/sqlite/audit.py);
the rest is models/store/audit.py's.

- A filter given as NULL is no filter (`?N IS NULL OR ...`): PostgreSQL cannot type a parameter that
  only meets IS NULL, so each such test casts it to its column's type.
- SQLite compares and sorts actors COLLATE NOCASE (ASCII letters folded, then bytes); PostgreSQL has no
  such collation, and lanner_nocase (ICU) sorts otherwise. `lower(x COLLATE "C")` folds only ASCII
  and compares bytes: the same answers on the same data (NOCASE ties such as "Anna" and "anna" broken
  by the bytes on both).
"""

from __future__ import annotations

from models.store import audit as base
from models.store.audit import AUDIT_COLUMNS


class AuditStore(base.AuditStore):
    """The audit_log rows of one PostgreSQL connection."""

    __slots__ = ()
    dialect = "postgres"

    SQL_ENTRIES = (
        f"SELECT {AUDIT_COLUMNS} FROM audit_log WHERE created_at >= ?1 "
        "AND (CAST(?5 AS BIGINT) IS NULL OR created_at < ?5) "
        "AND (CAST(?2 AS TEXT) IS NULL OR entity = ?2) AND (CAST(?3 AS BIGINT) IS NULL OR entity_id = ?3) "
        'AND (CAST(?6 AS TEXT) IS NULL OR lower(actor COLLATE "C") = lower(CAST(?6 AS TEXT) COLLATE "C")) '
        "AND (CAST(?7 AS BIGINT) IS NULL OR id < ?7) ORDER BY id DESC LIMIT ?4"
    )
    SQL_SORTED_ENTRIES = SQL_ENTRIES.replace(
        "ORDER BY id DESC LIMIT ?4", "ORDER BY {order} LIMIT ?4 OFFSET ?8"
    )
    # Bytes, and ASCII folded for actors, as SQLite's BINARY and NOCASE (above).
    SQL_SORT_TERMS = {
        "when": ("created_at", "id"),
        "who": ('lower(actor COLLATE "C")', 'actor COLLATE "C"'),
        "what": ('action COLLATE "C"', 'entity COLLATE "C"', "entity_id"),
    }
    # DISTINCT wants its ORDER BY in the select list: sort the distinct names outside it, bytes as
    # SQLite's BINARY.
    SQL_ACTORS = (
        "SELECT actor FROM (SELECT DISTINCT actor FROM audit_log) AS a "
        'ORDER BY lower(actor COLLATE "C"), actor COLLATE "C"'
    )
    SQL_ENTITIES = (
        'SELECT entity FROM (SELECT DISTINCT entity FROM audit_log) AS e ORDER BY entity COLLATE "C"'
    )
