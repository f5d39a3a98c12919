"""refusals: the statements of models/store/refusals.py mean the same on PostgreSQL: its
parameters are numbered (`?N`, which the connection translates; it does not translate `:name`) and
its DO UPDATE qualifies the stored row's columns, as PostgreSQL requires.

What differs is the bound on the day's addresses. On SQLite the statement runs under the write lock,
so its COUNT(*) is exact. Under PostgreSQL's READ COMMITTED, two transactions adding new addresses
at once each count the rows committed before them, both see room, and the day passes its bound (24
concurrent refusals with a bound of 4 left 5 or 6 address rows). So a refusal from an address the day
has no row for first takes a transaction-scoped advisory lock on the day: the new rows of a day are
added one transaction at a time, and the statement after the lock (a new snapshot) counts every row
added before it. A known address (the common case of one sender repeating itself) takes no lock.
"""

from __future__ import annotations

from models.store import refusals as base

# The advisory lock's first key (its second is the day): "lnrf" in ASCII, within int4.
LOCK_CLASS = 0x6C6E7266


class RefusalStore(base.RefusalStore):
    __slots__ = ()
    dialect = "postgres"

    # ?1 lock class, ?2 day, ?3 ip. The lock is taken only when the WHERE holds (no row yet).
    SQL_LOCK_DAY_FOR_NEW_ADDRESS = """
SELECT pg_advisory_xact_lock(?1, ?2)
WHERE NOT EXISTS (SELECT 1 FROM postback_refusal WHERE day = ?2 AND remote_ip = ?3)
"""

    def count(self, *, day: int, remote_ip: str, **rest) -> None:
        """As SQLite's; the caller's transaction holds the day's lock (if taken) until it ends."""
        self.conn.execute(self.SQL_LOCK_DAY_FOR_NEW_ADDRESS, (LOCK_CLASS, day, remote_ip)).close()
        super().count(day=day, remote_ip=remote_ip, **rest)
