"""privacy: truncating stored addresses on PostgreSQL (models/store/privacy.py holds what both share).

What differs: SQLite runs models.store.functions.anonymized_ip inside its UPDATE as the registered
lanner_anonymized_ip; PostgreSQL has no such function. So a chunk's addresses are read, truncated here
by the same Python function (the same answer on both dialects, IPv4-mapped and IPv6 included), and only
the changed ones written back in one UPDATE from arrays; all in the caller's transaction, as on SQLite.
"""

from __future__ import annotations

from models.store import privacy as base
from models.store.functions import anonymized_ip


class PrivacyStore(base.PrivacyStore):
    __slots__ = ()
    dialect = "postgres"
    # A click without its visitor key is left alone, as on SQLite (see there).
    SQL_CHUNK_IPS = "SELECT id, ip FROM click WHERE id >= ? AND id < ? AND visitor_key IS NOT NULL"
    SQL_SET_IPS = (
        "UPDATE click SET ip = truncated.ip FROM unnest(CAST(? AS BIGINT[]), CAST(? AS TEXT[])) "
        "AS truncated (id, ip) WHERE click.id = truncated.id"
    )

    def anonymize(self, first_id: int, end_id: int) -> int:
        """Truncate the addresses of the clicks with first_id <= id < end_id; how many changed."""
        ids, ips = [], []
        for click_id, ip in self.conn.execute(self.SQL_CHUNK_IPS, (first_id, end_id)).fetchall():
            truncated = anonymized_ip(ip)
            if truncated != ip:
                ids.append(click_id)
                ips.append(truncated)
        if not ids:
            return 0
        return self.conn.execute(self.SQL_SET_IPS, (ids, ips)).rowcount
