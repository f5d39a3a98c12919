"""Counters of postbacks refused before their key was known to be right (`postback_refusal`).

The bounds (addresses a day, samples an hour) are models/conversions/refusals.py's.
"""

from __future__ import annotations

from models.store.rows import Store


class RefusalStore(Store):
    """The refusal counters of one connection; `count` joins the caller's transaction."""

    # One statement: the address keeps its row, gets a new one while the day has room, or counts in
    # `other`. In DO UPDATE every right-hand side sees the row as it was before this refusal; its
    # columns are qualified (`r.`), which PostgreSQL needs (an unqualified one is ambiguous there).
    # ?1 day, ?2 ip, ?3 other, ?4 max_addresses, ?5 now, ?6 hour, ?7 sample, ?8 per_hour.
    SQL_COUNT = """
INSERT INTO postback_refusal AS r (day, remote_ip, refusals, first_at, last_at, sample_hour, samples, sample)
VALUES (
    ?1,
    CASE WHEN EXISTS (SELECT 1 FROM postback_refusal WHERE day = ?1 AND remote_ip = ?2)
           OR (SELECT COUNT(*) FROM postback_refusal WHERE day = ?1) < ?4
         THEN ?2 ELSE ?3 END,
    1, ?5, ?5, ?6, 1, ?7
)
ON CONFLICT (day, remote_ip) DO UPDATE SET
    refusals = r.refusals + 1,
    last_at = excluded.last_at,
    sample = CASE WHEN r.sample_hour < excluded.sample_hour OR r.samples < ?8
                  THEN excluded.sample ELSE r.sample END,
    samples = CASE WHEN r.sample_hour < excluded.sample_hour THEN 1
                   WHEN r.samples < ?8 THEN r.samples + 1 ELSE r.samples END,
    sample_hour = excluded.sample_hour
"""

    __slots__ = ()

    def count(
        self,
        *,
        day: int,
        remote_ip: str,
        other: str,
        max_addresses: int,
        now_ms: int,
        hour: int,
        sample: str,
        samples_per_hour: int,
    ) -> None:
        """One more refusal from `remote_ip` on `day` (in `other` once the day has max_addresses)."""
        self.conn.execute(
            self.SQL_COUNT, (day, remote_ip, other, max_addresses, now_ms, hour, sample, samples_per_hour)
        ).close()
