"""Counters of postbacks refused before their key was known to be right (`postback_refusal`).

The bounds (addresses a day, samples an hour) are models/conversions/refusals.py's.
"""

from __future__ import annotations

from models.store.sqlite.rows import Store


class RefusalStore(Store):
    """The refusal counters of one connection; `count` joins the caller's transaction."""

    # One statement: the address keeps its row, gets a new one while the day has room, or counts in
    # `other`. In DO UPDATE every right-hand side sees the row as it was before this refusal.
    SQL_COUNT = """
INSERT INTO postback_refusal (day, remote_ip, refusals, first_at, last_at, sample_hour, samples, sample)
VALUES (
    :day,
    CASE WHEN EXISTS (SELECT 1 FROM postback_refusal WHERE day = :day AND remote_ip = :ip)
           OR (SELECT COUNT(*) FROM postback_refusal WHERE day = :day) < :max_addresses
         THEN :ip ELSE :other END,
    1, :now, :now, :hour, 1, :sample
)
ON CONFLICT (day, remote_ip) DO UPDATE SET
    refusals = refusals + 1,
    last_at = excluded.last_at,
    sample = CASE WHEN sample_hour < excluded.sample_hour OR samples < :per_hour
                  THEN excluded.sample ELSE sample END,
    samples = CASE WHEN sample_hour < excluded.sample_hour THEN 1
                   WHEN samples < :per_hour THEN samples + 1 ELSE samples END,
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
            self.SQL_COUNT,
            {
                "day": day,
                "ip": remote_ip,
                "other": other,
                "max_addresses": max_addresses,
                "now": now_ms,
                "hour": hour,
                "sample": sample,
                "per_hour": samples_per_hour,
            },
        ).close()
