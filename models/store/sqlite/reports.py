"""reports on SQLite: what differs from PostgreSQL (models/store/postgres/reports.py); the rest is
models/store/reports.py's."""

from __future__ import annotations

import sqlite3

from models.store import reports as base
from models.store.sqlite.sums import float_sum


class PieceSql(base.PieceSql):
    __slots__ = ()
    dialect = "sqlite"
    money_sum = staticmethod(float_sum)  # The dialect's sum of a money expression.
    CLICK_SUMS = base.click_sums(float_sum)
    CLICK_SUMS_WITHOUT_LP = base.click_sums(float_sum, lp=False)
    CONVERSION_SUMS = base.conversion_sums(float_sum)
    # The waiting costs first, each click found by its id: SQLite's planner would walk the range's
    # clicks by time otherwise (PostgreSQL's estimates start from the small table by themselves).
    UNCOSTED_JOIN = "CROSS JOIN"

    @staticmethod
    def _expression(name: str, prefix: str) -> str:
        if name == "referrer_domain":  # ReportStore registers the function on the connection.
            return f"lanner_domain({prefix}{base.DIMENSION_COLUMNS[name]})"
        return base.PieceSql._expression(name, prefix)


class ReportStore(base.ReportStore):
    __slots__ = ()
    dialect = "sqlite"
    # Conversions with revenue (pending or not) whose payout has no rate yet, per currency.
    SQL_UNCONVERTED = (
        "SELECT cv.currency, COUNT(*), SUM(cv.payout) "
        "FROM conversion AS cv INDEXED BY conversion_unconverted JOIN click AS c ON c.id = cv.click_id "
        "WHERE cv.report_payout IS NULL "
        "AND cv.status IN ('lead', 'sale', 'rebill') AND {where} GROUP BY 1 ORDER BY 1"
    )
    piece_sql = PieceSql  # The dialect's SELECT writer.

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        # The referrer_domain dimension, computed in Python; registering again replaces it.
        conn.create_function("lanner_domain", 1, base.referrer_domain, deterministic=True)
