"""currency on SQLite: what differs from PostgreSQL (models/store/postgres/currency.py); the rest is
models/store/currency.py's."""

from __future__ import annotations

from models.store import currency as base


class CurrencyStore(base.CurrencyStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_UNCONVERTED_OF = """
SELECT cv.id, cv.click_id, cv.campaign_id, cv.status, cv.payout, cv.cost FROM conversion AS cv
INDEXED BY conversion_unconverted WHERE cv.report_payout IS NULL AND cv.currency = ?
"""
