"""reports on PostgreSQL: SQLite's reads, with two differences.

- The referrer_domain dimension: SQLite registers referrer_domain() as the SQL function lanner_domain.
  An exact SQL twin of urlsplit() (its IPv6 and NFKC checks included) would be long and drift with
  Python's releases, so PostgreSQL groups by the referrer cut just after its host (REFERRER_HOST_PART:
  same cut, same domain, and about as many values as domains) and the store maps that to the domain
  in Python, filters by it there and hands on the rows; the caller sums the rows of one group, as it
  sums the raw conversions' with the clicks'.
- INDEXED BY is SQLite's planner hint: PostgreSQL's planner picks the partial index by itself.
- Money is summed by models/store/postgres/sums.py's float_sum: a sum past the largest double is
  Infinity, as SQLite's (PostgreSQL's SUM would refuse the statement: a report answering 500).
"""

from __future__ import annotations

from collections.abc import Iterator

from models.store import reports as base
from models.store.postgres.sums import float_sum
from models.store.reports import DIMENSION_COLUMNS, referrer_domain

REFERRER = "referrer_domain"
# The referrer up to the end of its host: through its second "/" and on to the next "/", "?" or "#"
# (the whole text if it has fewer than two "/"). urlsplit() drops tabs and line breaks before it
# looks, so they go first; nothing after the cut changes the host, so referrer_domain() of this
# is referrer_domain() of the referrer.
REFERRER_HOST_PART = (
    "COALESCE(substring(translate({column}, E'\\t\\r\\n', '') FROM '^[^/]*/[^/]*/[^/?#]*'), "
    "translate({column}, E'\\t\\r\\n', ''))"
)


class PieceSql(base.PieceSql):
    __slots__ = ()
    dialect = "postgres"
    money_sum = staticmethod(float_sum)
    CLICK_SUMS = base.click_sums(float_sum)
    CLICK_SUMS_WITHOUT_LP = base.click_sums(float_sum, lp=False)
    CONVERSION_SUMS = base.conversion_sums(float_sum)

    @staticmethod
    def _expression(name: str, prefix: str) -> str:
        if name == REFERRER:
            return REFERRER_HOST_PART.format(column=prefix + DIMENSION_COLUMNS[name])
        return base.PieceSql._expression(name, prefix)


class ReportStore(base.ReportStore):
    __slots__ = ()
    dialect = "postgres"
    piece_sql = PieceSql
    SQL_UNCONVERTED = (
        f"SELECT cv.currency, COUNT(*), {float_sum('cv.payout')} "
        "FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id "
        "WHERE cv.report_payout IS NULL "
        "AND cv.status IN ('lead', 'sale', 'rebill') AND {where} GROUP BY 1 ORDER BY 1"
    )
    # With a referrer_domain filter: per currency and referrer host part, summed once filtered.
    SQL_UNCONVERTED_BY_REFERRER = (
        f"SELECT cv.currency, {{referrer}}, COUNT(*), {float_sum('cv.payout')} "
        "FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id "
        "WHERE cv.report_payout IS NULL "
        "AND cv.status IN ('lead', 'sale', 'rebill') AND {where} GROUP BY 1, 2"
    )

    def rows(
        self,
        source: str,
        start: int,
        end: int,
        *,
        groups: tuple[str, ...],
        filters: dict[str, tuple],
        bucket: int | None,
        after: int | None = None,
        conversions_after: int | None = None,
    ) -> Iterator[tuple]:
        positions = {"after": after, "conversions_after": conversions_after}
        if REFERRER not in groups and REFERRER not in filters:
            yield from super().rows(
                source, start, end, groups=groups, filters=filters, bucket=bucket, **positions
            )
            return
        wanted = filters.get(REFERRER)
        sql_groups = groups if REFERRER in groups else (*groups, REFERRER)
        sql_filters = {name: values for name, values in filters.items() if name != REFERRER}
        at = (1 if bucket else 0) + sql_groups.index(REFERRER)
        is_grouped = REFERRER in groups
        rows = super().rows(
            source, start, end, groups=sql_groups, filters=sql_filters, bucket=bucket, **positions
        )
        for row in rows:
            domain = referrer_domain(row[at])
            if wanted is not None and domain not in wanted:
                continue
            yield (*row[:at], domain, *row[at + 1 :]) if is_grouped else (*row[:at], *row[at + 1 :])

    def unconverted(self, start: int, end: int, filters: dict[str, tuple]) -> list[tuple[str, int, float]]:
        wanted = filters.get(REFERRER)
        if wanted is None:
            return super().unconverted(start, end, filters)
        others = {name: values for name, values in filters.items() if name != REFERRER}
        where, params = self.piece_sql((), others, None).where("c.", "cv.click_created_at", start, end, "cv.")
        sql = self.SQL_UNCONVERTED_BY_REFERRER.format(
            referrer=PieceSql._expression(REFERRER, "c."), where=" AND ".join(where)
        )
        sums: dict[str, list] = {}
        for currency, host_part, count, payout in self.conn.execute(sql, params).fetchall():
            if referrer_domain(host_part) in wanted:
                total = sums.setdefault(currency, [0, 0.0])
                total[0] += count
                total[1] += payout
        # SQLite orders the currency codes bytewise; Python's str order is the same.
        return [(currency, count, payout) for currency, (count, payout) in sorted(sums.items())]
