"""reports on the columnar history (DuckDB): the raw click piece's SELECT over its `click` table, the
third sibling of models/store/sqlite/reports.py and models/store/postgres/reports.py.

What differs: referrer_domain is a column (computed at copy by the reports' own function), so it is
grouped and filtered as it is; a money sum is DuckDB's SUM of a DOUBLE; and the piece reads only the
clicks the history answers for (id up to the row store's position, none of those queued for a copy
again), the row store the rest (models/reporting/reports.py sums both).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from models.store import reports as base


def float_sum(expression: str) -> str:
    """The sum of a money expression (DOUBLE), as SQLite's: Infinity past the largest double."""
    return f"SUM({expression})"


class PieceSql(base.PieceSql):
    __slots__ = ()
    dialect = "duckdb"
    money_sum = staticmethod(float_sum)
    CLICK_SUMS = base.click_sums(float_sum)
    CLICK_SUMS_WITHOUT_LP = base.click_sums(float_sum, lp=False)
    CONVERSION_SUMS = base.conversion_sums(float_sum)

    @staticmethod
    def _expression(name: str, prefix: str) -> str:
        if name == "referrer_domain":
            return f"{prefix}referrer_domain"
        return base.PieceSql._expression(name, prefix)

    def history_clicks(self, start: int, end: int, position: int, queued: list[int]) -> tuple[str, list]:
        where, params = self.where("c.", "c.created_at", start, end)
        where += ["c.id <= ?", "c.id NOT IN (SELECT unnest(CAST(? AS BIGINT[])))"]
        return self.clicks_select(where, [*params, position, queued])


def history_click_rows(
    conn: Any,
    groups: tuple[str, ...],
    filters: dict[str, tuple],
    bucket: int | None,
    start: int,
    end: int,
    *,
    position: int,
    queued: list[int],
) -> Iterator[tuple]:
    """The click sums of [start, end) per group, as ReportStore.rows gives a raw piece's, from the
    clicks the history answers for."""
    sql, params = PieceSql(groups, filters, bucket).history_clicks(start, end, position, queued)
    yield from conn.execute(sql, params).fetchall()
