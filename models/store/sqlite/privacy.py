"""Truncating the addresses of stored clicks (`lanner privacy anonymize-stored`), a chunk a call.

Each call runs in the caller's transaction, so the spool flusher gets the write lock in between.
`lanner_anonymized_ip` is models.clicks.privacy.anonymized_ip, registered on the connection
(models/store/sqlite/database.py). The visitor key is left as it is: it is the full address's.
"""

from __future__ import annotations

from models.store.sqlite.meta import MetaStore
from models.store.sqlite.rows import Store, fetch_one


class PrivacyStore(Store):
    SQL_ID_RANGE = "SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM click"
    # A click without its visitor key (migration 0005's backfill not done) is left alone: its key
    # would then be computed from the truncated address.
    SQL_ANONYMIZE = (
        "UPDATE click SET ip = lanner_anonymized_ip(ip) "
        "WHERE id >= ? AND id < ? AND visitor_key IS NOT NULL AND ip != lanner_anonymized_ip(ip)"
    )

    __slots__ = ()

    def id_range(self) -> tuple[int, int]:
        """(lowest, highest) click id; (0, 0) without clicks."""
        return tuple(fetch_one(self.conn, self.SQL_ID_RANGE))

    def is_keyed(self) -> bool:
        """Every click has its visitor key and the web workers probe by it (migration 0005 done)."""
        return MetaStore(self.conn).get("visitor_probe") == "key"

    def anonymize(self, first_id: int, end_id: int) -> int:
        """Truncate the addresses of the clicks with first_id <= id < end_id; how many changed."""
        return self.conn.execute(self.SQL_ANONYMIZE, (first_id, end_id)).rowcount
