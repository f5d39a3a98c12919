"""Truncating the addresses of stored clicks (`lanner privacy anonymize-stored`), a chunk a call.

Each call runs in the caller's transaction, so the spool flusher gets the write lock in between.
The visitor key is left as it is: it is the full address's.
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.meta import MetaStore
from models.store.rows import Store, fetch_single


class PrivacyStore(Store):
    SQL_ID_RANGE = "SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM click"

    __slots__ = ()

    def id_range(self) -> tuple[int, int]:
        """(lowest, highest) click id; (0, 0) without clicks."""
        return tuple(fetch_single(self.conn, self.SQL_ID_RANGE))

    def is_keyed(self) -> bool:
        """Every click has its visitor key and the web workers probe by it (migration 0005 done)."""
        return MetaStore(self.conn).get("visitor_probe") == "key"

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).

    @abstractmethod
    def anonymize(self, first_id: int, end_id: int) -> int:
        """Truncate the addresses of the clicks with first_id <= id < end_id (models.clicks.privacy's
        anonymized_ip); how many changed. A click without its visitor key is left alone: its key would
        then be computed from the truncated address."""
