"""privacy on SQLite: what differs from PostgreSQL (models/store/postgres/privacy.py); the rest is
models/store/privacy.py's.

`lanner_anonymized_ip` is models.store.functions.anonymized_ip, registered on the connection
(models/store/sqlite/database.py): the UPDATE truncates in place.
"""

from __future__ import annotations

from models.store import privacy as base


class PrivacyStore(base.PrivacyStore):
    __slots__ = ()
    dialect = "sqlite"
    # A click without its visitor key (migration 0005's backfill not done) is left alone: its key
    # would then be computed from the truncated address.
    SQL_ANONYMIZE = (
        "UPDATE click SET ip = lanner_anonymized_ip(ip) "
        "WHERE id >= ? AND id < ? AND visitor_key IS NOT NULL AND ip != lanner_anonymized_ip(ip)"
    )

    def anonymize(self, first_id: int, end_id: int) -> int:
        """Truncate the addresses of the clicks with first_id <= id < end_id; how many changed."""
        return self.conn.execute(self.SQL_ANONYMIZE, (first_id, end_id)).rowcount
