"""The reads of a report: metric sums per group from the rollup tables or raw rows, and what it names.

What to read (the time range, its pieces, the cube, the time bucket) and what the sums become (labels,
ratios, sorted rows) are models/reporting/reports.py's; the statements are here. Every method reads
in the caller's transaction: the report holds one read snapshot over all its pieces.

A report's groups and filters are dimension names (models/tables/dimensions.py); only those and
the rollup tables of models/reporting/rollups.py become identifiers, every value is bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from models.store.costs import CostStore
from models.store.rollups import LP_SUMS, RollupStore
from models.store.rows import Dialectal, Store, fetch_single
from models.tables.dimensions import (
    CLICK_METRICS,
    CONVERSION_METRICS,
    CUBES,
    DAY_MS,
    DIMENSION_COLUMNS,
    HOUR_MS,
    ID_GROUPS,
    LP_METRICS,
    METRICS,
    MONEY_METRICS,
)

# Rollup table -> the width of its periods.
_TABLE_WIDTHS = {
    table: {"hour": HOUR_MS, "day": DAY_MS}[granularity]
    for _, tables in CUBES.values()
    for granularity, table in tables.items()
}
# What raw rows sum to, in METRICS order: a click adds no conversion metrics, a conversion no click ones.
_ZERO_CONVERSIONS = ", ".join("0" for _ in CONVERSION_METRICS)
_ZERO_CLICKS = ", ".join("0" for _ in CLICK_METRICS)
# A conversion the columnar history does not answer for (its copy, or its click's, is not yet copied or
# is queued for a copy again): the row store's. Bound: the conversion position, then the click position.
# PERF: as a set of ids, each part an index range or lookup (migration 0035's conversion_click_id), so
# the row store reads the minutes since the last append, not every conversion of the range: 200,000
# conversions, 215 ms as ORed conditions on each row, 0.3 ms so.
# With it, the conversion's own columns are read as `+cv.x`: SQLite then uses no index of theirs (a
# campaign's range would be every conversion of the campaign) but the primary key lookups of the ids;
# a no-op for PostgreSQL's planner.
UNINDEXED = "+cv."
# The clicks the columnar history does not answer for: those past its position (an id range) and those
# queued for a copy again (ids), two selects, with no OR between them. PERF: `+c.` keeps SQLite off the
# (campaign, time) index for the range's other conditions and groups (grouped by campaign, SQLite
# walked the whole index for its order), so it reads ids, not the range: a campaign's 7 days (a fresh
# history: no click past the position) 45 ms of CPU through the index, 200 ms grouped by campaign too
# (a rule's report), ~0.1 ms by id.
# Only while few clicks are past the position (NEARBY_CLICKS): a history far behind (the worker
# stopped) has more clicks past it than a narrow report's range holds, which the index reads faster.
UNINDEXED_CLICK = "+c."
NEARBY_CLICKS = 100_000
UNANSWERED_CONVERSION = (
    "cv.id IN (SELECT id FROM conversion WHERE id > ? "
    "UNION ALL SELECT conversion_id FROM history_conversion_change "
    "UNION ALL SELECT id FROM conversion WHERE click_id > ? "
    "UNION ALL SELECT id FROM conversion WHERE click_id IN (SELECT click_id FROM history_change))"
)


def click_sums(money_sum, *, lp: bool = True) -> str:
    """A raw click piece's sums in CLICK_METRICS order, its cost summed with the dialect's `money_sum`;
    `lp`: the click table has the lander step's columns (else its LP metrics are 0)."""
    return (
        "COUNT(*), SUM(c.is_unique_global), SUM(c.is_unique_campaign), SUM(c.is_unique_stream), "
        f"SUM(c.is_bot), {money_sum('c.cost')}, {LP_SUMS.format(c='c.') if lp else '0, 0'}"
    )


def conversion_sums(money_sum) -> str:
    """A raw conversion piece's sums in CONVERSION_METRICS order, money summed with `money_sum`."""
    # CASE WHEN, not SUM(cv.status = 'lead'): PostgreSQL's comparison is a boolean, which SUM refuses.
    return (
        "SUM(CASE WHEN cv.status = 'lead' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN cv.status = 'sale' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN cv.status = 'rejected' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN cv.status = 'trash' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN cv.status = 'rebill' THEN 1 ELSE 0 END), "
        + money_sum("CASE WHEN cv.status IN ('sale', 'rebill') THEN COALESCE(cv.report_payout, 0) ELSE 0 END")
        + ", "
        + money_sum("CASE WHEN cv.status = 'lead' THEN COALESCE(cv.report_payout, 0) ELSE 0 END")
        + f", {money_sum('cv.cost')}"
    )


def referrer_domain(referrer: str | None) -> str:
    """The referrer URL's host without "www." ("" for none): `lanner_domain()` in SQL."""
    if not referrer:
        return ""
    try:
        host = urlsplit(referrer).hostname or ""
    except ValueError:
        return ""
    return host[4:] if host.startswith("www.") else host


class PieceSql(Dialectal):
    """The SELECTs of one piece: time bucket, group expressions, filters, and the metric sums."""

    __slots__ = ("groups", "filters", "bucket", "lp")

    def __init__(
        self, groups: tuple[str, ...], filters: dict[str, tuple], bucket: int | None, lp: bool = True
    ) -> None:
        """`lp`: the database has migration 0016's LP metrics (a rehearsal `--to` an earlier one has not)."""
        self.groups = groups
        self.filters = filters
        self.lp = lp
        self.bucket = int(bucket) if bucket else None  # A width the report chose, written as a number.

    def where(
        self, prefix: str, time_column: str, start: int, end: int, id_prefix: str | None = None
    ) -> tuple[list[str], list]:
        """`id_prefix`: where campaign/stream/offer filters read (a conversion's own copy: its index)."""
        where, params = [f"{time_column} >= ?", f"{time_column} < ?"], [start, end]
        for name, values in self.filters.items():
            expression = self._expression(name, id_prefix if id_prefix and name in ID_GROUPS else prefix)
            where.append(f"{expression} IN ({', '.join('?' * len(values))})")
            params.extend(values)
        return where, params

    @staticmethod
    def _expression(name: str, prefix: str) -> str:
        column = DIMENSION_COLUMNS[name]  # KeyError for a name that is no dimension.
        if name in ("stream", "offer", "lander") and prefix != "r.":
            return f"COALESCE({prefix}{column}, 0)"
        return prefix + column

    def _select(
        self, prefix: str, time_column: str, is_bucketed: bool = False, id_prefix: str | None = None
    ) -> list[str]:
        """`is_bucketed`: the time column holds buckets already (rollup_hour): grouping by the bare
        column follows the primary key's order, with no temporary B-tree (PERF: 270 -> 60 ms).
        `id_prefix`: where campaign/stream/offer groups read (as `where`'s)."""
        if not self.bucket:
            parts = []
        elif is_bucketed:
            parts = [time_column]
        else:
            parts = [f"{time_column} - {time_column} % {self.bucket}"]
        return parts + [
            self._expression(name, id_prefix if id_prefix and name in ID_GROUPS else prefix)
            for name in self.groups
        ]

    def _group_by(self) -> str:
        count = len(self.groups) + (1 if self.bucket else 0)
        return f" GROUP BY {', '.join(str(n) for n in range(1, count + 1))}" if count else ""

    def rollup(self, table: str, start: int, end: int) -> tuple[str, list]:
        if table not in _TABLE_WIDTHS:
            raise ValueError(f"{table!r} is no rollup table.")
        where, params = self.where("r.", "r.period", start, end)
        select = self._select("r.", "r.period", self.bucket == _TABLE_WIDTHS[table])
        select += [
            self.money_sum(f"r.{metric}")
            if metric in MONEY_METRICS
            else ("0" if not self.lp and metric in LP_METRICS else f"SUM(r.{metric})")
            for metric in METRICS
        ]
        sql = f"SELECT {', '.join(select)} FROM {table} AS r WHERE {' AND '.join(where)}{self._group_by()}"
        return sql, params

    def raw_clicks(
        self, start: int, end: int, after: int | None = None, *, is_near: bool = False
    ) -> tuple[str, list]:
        """`after`: only the clicks the columnar history does not answer for (models/reporting/history.py):
        past its position, or mutated since they were copied. `is_near`: few clicks are past it, so
        they are read by id (NEARBY_CLICKS), not the range by its index."""
        if after is None:
            return self.clicks_select(*self.where("c.", "c.created_at", start, end))
        if not is_near:
            where, params = self.where("c.", "c.created_at", start, end)
            where.append("(c.id > ? OR c.id IN (SELECT click_id FROM history_change))")
            return self.clicks_select(where, [*params, after])
        where, params = self.where("c.", "+c.created_at", start, end, id_prefix=UNINDEXED_CLICK)
        past, past_params = self.clicks_select([*where, "c.id > ?"], [*params, after], UNINDEXED_CLICK)
        queued, queued_params = self.clicks_select(
            [*where, "c.id IN (SELECT click_id FROM history_change)", "c.id <= ?"],
            [*params, after],
            UNINDEXED_CLICK,
        )
        return f"{past} UNION ALL {queued}", [*past_params, *queued_params]

    def clicks_select(self, where: list[str], params: list, id_prefix: str | None = None) -> tuple[str, list]:
        """The click piece's SELECT with these conditions (ANDed); `id_prefix` as _select's."""
        sums = self.CLICK_SUMS if self.lp else self.CLICK_SUMS_WITHOUT_LP
        select = self._select("c.", "c.created_at", id_prefix=id_prefix)
        sql = (
            f"SELECT {', '.join(select + [sums, _ZERO_CONVERSIONS])} FROM click AS c "
            f"WHERE {' AND '.join(where)}{self._group_by()}"
        )
        return sql, params

    def raw_conversions(self, start: int, end: int, after: tuple[int, int] | None = None) -> tuple[str, list]:
        """`after` (the history's click and conversion positions): only the conversions the columnar
        history does not answer for (models/store/duckdb/reports.py `history_conversions` the others)."""
        if after is None:
            where, params = self.where("c.", "cv.click_created_at", start, end, id_prefix="cv.")
        else:
            where, params = self.where("c.", "+cv.click_created_at", start, end, id_prefix=UNINDEXED)
            where.append(UNANSWERED_CONVERSION)
            params += [after[1], after[0]]
        return self.conversions_select(where, params)

    def conversions_select(self, where: list[str], params: list) -> tuple[str, list]:
        """The conversion piece's SELECT with these conditions (ANDed), grouped by its click's values."""
        select = self._select("c.", "c.created_at")
        sql = (
            f"SELECT {', '.join(select + [_ZERO_CLICKS, self.CONVERSION_SUMS])} "
            f"FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id "
            f"WHERE {' AND '.join(where)}{self._group_by()}"
        )
        return sql, params

    def orphan_conversions(
        self, start: int, end: int, after: tuple[int, int] | None = None
    ) -> tuple[str, list]:
        """Per click id, the conversion sums (CONVERSION_METRICS) of [start, end) (their click's time)
        whose click the row store no longer holds, only the columnar history (models/reporting/reports.py
        groups them by the history's copy). Filtered here by the ids a conversion carries; this
        PieceSql's filters must be ID_GROUPS ones (the rest are the history's to apply). `after` (the
        history's click and conversion positions): only those the history's own copies do not answer."""
        if after is None:
            where, params = self.where("c.", "cv.click_created_at", start, end, id_prefix="cv.")
        else:
            where, params = self.where("c.", "+cv.click_created_at", start, end, id_prefix=UNINDEXED)
            where.append(UNANSWERED_CONVERSION)
            params += [after[1], after[0]]
        where.append("NOT EXISTS (SELECT 1 FROM click AS c WHERE c.id = cv.click_id)")
        sql = (
            f"SELECT cv.click_id, {self.CONVERSION_SUMS} FROM conversion AS cv "
            f"WHERE {' AND '.join(where)} GROUP BY cv.click_id"
        )
        return sql, params

    def orphan_unconverted(self, start: int, end: int) -> tuple[str, list]:
        """(click id, currency, payout, the UTC day it was recorded on as its start in ms) of each
        conversion of [start, end) with revenue that has no exchange rate yet, whose click the row store
        no longer holds; filtered as orphan_conversions."""
        where, params = self.where("c.", "cv.click_created_at", start, end, id_prefix="cv.")
        where += [
            "cv.report_payout IS NULL",
            "cv.status IN ('lead', 'sale', 'rebill')",
            "NOT EXISTS (SELECT 1 FROM click AS c WHERE c.id = cv.click_id)",
        ]
        return (
            "SELECT cv.click_id, cv.currency, cv.payout, "
            f"cv.created_at - cv.created_at % {DAY_MS} FROM conversion AS cv WHERE {' AND '.join(where)}",
            params,
        )

    def raw_unconverted(self, start: int, end: int) -> tuple[str, list]:
        """Per group (at the click's time and dimensions), currency and UTC day the conversion was
        recorded on (the day whose rate it waits for): (count, payout) of the conversions with revenue,
        pending or not, that have no exchange rate yet."""
        where, params = self.where("c.", "cv.click_created_at", start, end, id_prefix="cv.")
        where += ["cv.report_payout IS NULL", "cv.status IN ('lead', 'sale', 'rebill')"]
        select = self._select("c.", "c.created_at")
        select += ["cv.currency", f"cv.created_at - cv.created_at % {DAY_MS}"]
        keys = ", ".join(str(n) for n in range(1, len(select) + 1))
        select += ["COUNT(*)", self.money_sum("cv.payout")]
        sql = (
            f"SELECT {', '.join(select)} FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id "
            f"WHERE {' AND '.join(where)} GROUP BY {keys}"
        )
        return sql, params

    def raw_uncosted(self, start: int, end: int) -> tuple[str, list]:
        """Per group, currency and UTC day of the click (the day whose rate it waits for): (count,
        amount) of the clicks of [start, end) whose cost waits for an exchange rate (migration 0034).
        Read from the waiting costs (a handful of rows), each joined to its click for its groups."""
        where, params = self.where("c.", "u.created_at", start, end)
        select = self._select("c.", "c.created_at")
        select += ["u.currency", f"u.created_at - u.created_at % {DAY_MS}"]
        keys = ", ".join(str(n) for n in range(1, len(select) + 1))
        select += ["COUNT(*)", self.money_sum("u.amount")]
        sql = (
            f"SELECT {', '.join(select)} FROM unrated_cost AS u {self.UNCOSTED_JOIN} click AS c "
            f"ON c.id = u.click_id WHERE {' AND '.join(where)} GROUP BY {keys}"
        )
        return sql, params

    UNCOSTED_JOIN = "JOIN"

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    money_sum: Callable[[str], str]
    CLICK_SUMS: str
    CLICK_SUMS_WITHOUT_LP: str
    CONVERSION_SUMS: str


class ReportStore(Store):
    """A report's reads on one connection, in the caller's read transaction."""

    SQL_UNRATED_COST_CAMPAIGNS = """
SELECT c.id, c.alias, c.cost_currency FROM campaign AS c
WHERE c.cost_value > 0 AND c.cost_currency != ?
    AND NOT EXISTS (SELECT 1 FROM exchange_rate AS r WHERE r.currency = c.cost_currency)
ORDER BY c.id
"""
    SQL_CAMPAIGN_IDS = "SELECT alias, id FROM campaign"
    SQL_LAST_CLICK_ID = "SELECT COALESCE(MAX(id), 0) FROM click"
    SQL_NAMES = {
        "campaign": "SELECT id, alias FROM campaign",
        "offer": "SELECT id, name FROM offer",
        "stream": "SELECT id, name FROM stream",
        "network": "SELECT id, name FROM network",
        "traffic_source": "SELECT id, name FROM traffic_source",
        "lander": "SELECT id, name FROM lander",
    }
    SQL_OFFER_NETWORKS = "SELECT id, network_id FROM offer"
    SQL_CAMPAIGN_SOURCES = "SELECT id, source_id FROM campaign"

    __slots__ = ()

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
        """The metric sums of [start, end) per group, read from `source`: a rollup table, or "raw"
        (clicks, then conversions at their click's time; with `after`, the history's position, only the
        clicks the columnar history does not answer for; with `conversions_after` too, the history's
        conversion position, only such conversions), or "unconverted" (raw_unconverted's rows:
        the conversions without a rate per group, currency and day, ending in count and payout), or
        "uncosted" (raw_uncosted's: the clicks whose cost waits for a rate, ending in count and amount).

        Each row is (the time bucket, when `bucket` is a width in ms; the values of `groups`; the
        sums of METRICS). A filter's values are what its column holds (ints for ID_GROUPS). A group
        may come in more than one row (the raw conversions' after the clicks'); the caller sums them.
        """
        lp = RollupStore(self.conn).present_metrics() == METRICS
        sql = self.piece_sql(groups, filters, bucket, lp)
        if source == "unconverted":
            statements = [sql.raw_unconverted(start, end)]
        elif source == "uncosted":
            statements = [sql.raw_uncosted(start, end)]
        elif source == "raw":
            positions = None if after is None or conversions_after is None else (after, conversions_after)
            is_near = after is not None and self.last_click_id() - after <= NEARBY_CLICKS
            statements = [
                sql.raw_clicks(start, end, after, is_near=is_near),
                sql.raw_conversions(start, end, positions),
            ]
        else:
            statements = [sql.rollup(source, start, end)]
        for statement, params in statements:
            yield from self.conn.execute(statement, params)

    def last_click_id(self) -> int:
        """The highest click id (0: none), from the end of the primary key."""
        return fetch_single(self.conn, self.SQL_LAST_CLICK_ID)[0]

    def orphan_conversions(
        self, start: int, end: int, filters: dict[str, tuple], after: tuple[int, int] | None = None
    ) -> list[tuple]:
        """(click id, the sums of CONVERSION_METRICS) of the conversions in [start, end) (their click's
        time) whose click is no longer in the row store (deleted once the columnar history held it),
        filtered by `filters`' ID_GROUPS (the others are the click's: the history applies them); with
        `after` (the history's click and conversion positions), only those its copies do not answer."""
        id_filters = {name: values for name, values in filters.items() if name in ID_GROUPS}
        sql, params = self.piece_sql((), id_filters, None).orphan_conversions(start, end, after)
        return self.conn.execute(sql, params).fetchall()

    def orphan_unconverted(self, start: int, end: int, filters: dict[str, tuple]) -> list[tuple]:
        """(click id, currency, payout, day) of the conversions unconverted() would count but for their click,
        which is no longer in the row store (filtered by `filters`' ID_GROUPS, as orphan_conversions)."""
        id_filters = {name: values for name, values in filters.items() if name in ID_GROUPS}
        sql, params = self.piece_sql((), id_filters, None).orphan_unconverted(start, end)
        return self.conn.execute(sql, params).fetchall()

    def unconverted(self, start: int, end: int, filters: dict[str, tuple]) -> list[tuple[str, int, float]]:
        """(currency, conversions, payout) of the conversions in [start, end) (their click's time)
        with revenue, pending or not, that are not in revenue for want of an exchange rate."""
        where, params = self.piece_sql((), filters, None).where(
            "c.", "cv.click_created_at", start, end, "cv."
        )
        sql = self.SQL_UNCONVERTED.format(where=" AND ".join(where))
        return self.conn.execute(sql, params).fetchall()

    def has_uncosted(self) -> bool:
        """Whether any click's cost waits for an exchange rate (PERF: the look per group only then)."""
        return CostStore(self.conn).has_unrated()

    def unrated_cost_campaigns(self, currency: str) -> list[tuple[int, str, str]]:
        """(id, alias, cost currency) of the campaigns with a cost in a currency that has no exchange
        rate (into `currency`, the report's), by id."""
        return self.conn.execute(self.SQL_UNRATED_COST_CAMPAIGNS, (currency,)).fetchall()

    def campaign_ids_by_alias(self) -> dict[str, int]:
        return dict(self.conn.execute(self.SQL_CAMPAIGN_IDS).fetchall())

    def offer_networks(self) -> dict[int, int | None]:
        """Offer id -> its network's id (None: none)."""
        return dict(self.conn.execute(self.SQL_OFFER_NETWORKS).fetchall())

    def campaign_sources(self) -> dict[int, int | None]:
        """Campaign id -> its traffic source's id (None: none)."""
        return dict(self.conn.execute(self.SQL_CAMPAIGN_SOURCES).fetchall())

    def names(self, kind: str) -> dict[int, str]:
        """Id -> name of every campaign (its alias), stream, offer, network or traffic source."""
        return dict(self.conn.execute(self.SQL_NAMES[kind]).fetchall())

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_UNCONVERTED: str
    piece_sql: type[PieceSql]  # The dialect's SELECT writer.
