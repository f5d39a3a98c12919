"""currency on PostgreSQL: what differs from SQLite (models/store/sqlite/currency.py);
the rest is models/store/currency.py's.

- SQLite's `INDEXED BY conversion_unconverted` is dropped: PostgreSQL's planner uses the partial
  index (report_payout IS NULL) by itself.
"""

from __future__ import annotations

from models.store import currency as base


class CurrencyStore(base.CurrencyStore):
    """The rates and currency labels of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_UNCONVERTED_OF = """
SELECT cv.id, cv.click_id, cv.campaign_id, cv.status, cv.payout, cv.cost FROM conversion AS cv
WHERE cv.report_payout IS NULL AND cv.currency = ?
"""
