"""refusals on PostgreSQL: what differs from models/store/sqlite/refusals.py.

- SQL_COUNT names its parameters by number (`?1`..`?8`), not by name (`:day`): the connection
  translates SQLite's `?` and `?N` (models/store/postgres/params.py), not its `:name`.
- In DO UPDATE the stored row's columns are qualified (`r.samples`, the table aliased `r`): PostgreSQL calls
  an unqualified one ambiguous between the row and `excluded`, where SQLite takes the row's.
"""

from __future__ import annotations

from models.store.sqlite import refusals as sqlite


class RefusalStore(sqlite.RefusalStore):
    """The refusal counters of one PostgreSQL connection; `count` joins the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

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
        self.conn.execute(
            self.SQL_COUNT, (day, remote_ip, other, max_addresses, now_ms, hour, sample, samples_per_hour)
        ).close()
