"""reports on the columnar history (DuckDB): the raw click piece's SELECT over its `click` table, the
third sibling of models/store/sqlite/reports.py and models/store/postgres/reports.py.

The history holds conversions too (`conversion`): those it answers for (copied and not queued, and
their click likewise) are joined here to the history's copy of their click (`history_converted_rows`),
which gives their groups and the filters on what a conversion does not carry (country, sub_id_N ...).
The rest come from the row store; of those, one whose click the row store no longer holds (deleted
once the history held it) is summed per click there (models/store/reports.py `orphan_conversions`) and
those sums are joined here to the history's copy of the click.

What differs: referrer_domain is a column (computed at copy by the reports' own function), so it is
grouped and filtered as it is; a money sum is DuckDB's SUM of a DOUBLE; and the piece reads only the
clicks the history answers for (id up to the row store's position, none of those queued for a copy
again), the row store the rest (models/reporting/reports.py sums both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from models.store import reports as base
from models.store.duckdb.subidcube import CUBE_METRICS, DAY_MS, SubidCube
from models.tables.dimensions import CLICK_METRICS, ID_GROUPS, MONEY_METRICS

_ZERO_CLICKS = ", ".join("0" for _ in CLICK_METRICS)
_NO_CLICKS = (0,) * len(CLICK_METRICS)
_ZERO_CONVERSIONS = ", ".join("0" for _ in base.CONVERSION_METRICS)
assert CUBE_METRICS == CLICK_METRICS
# What the sub id cube keeps of a report's groups and filters (a sub id slot's are its `value`).
_CUBE_COLUMNS = {"campaign": "q.campaign_id", "country": "q.country"}


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

    def history_clicks(
        self,
        start: int,
        end: int,
        position: int,
        queued: list[int],
        cube_days: list[tuple[int, int, int]] | None = None,
    ) -> tuple[str, list]:
        """The click piece over the clicks the history answers for (id up to `position`, not `queued`).
        With `cube_days` (SubidCube.days of the range: (day, kept, empty)), the whole UTC days of the
        range the sub id cube answers this piece for are read from it, less the clicks of those days it
        holds but the history does not answer for (past the position, queued: their old copies, which the
        cube summed), and the rest of the range from the clicks (docs/analytics.md, "The sub id cube")."""
        slot = self.cube_slot()
        answered = [] if slot is None else _cube_sources(cube_days or [], slot, start, end)
        if not answered:
            where, params = self.where("c.", "c.created_at", start, end)
            ids, id_params = answered_by("c.id", position, queued)
            return self.clicks_select(where + ids, [*params, *id_params])
        days = [day for day, _ in answered]
        parts: list[tuple[str, list]] = []
        for source in sorted({source for _, source in answered}):
            parts.append(self._cube_select(source, [day for day, s in answered if s == source]))
        for low, high in _uncovered(start, end, days):
            where, params = self.where("c.", "c.created_at", low, high)
            ids, id_params = answered_by("c.id", position, queued)
            parts.append(self._click_sums(where + ids, [*params, *id_params]))
        # The clicks of the cube's days it summed but the history does not answer for, taken off.
        where, params = self.where("c.", "c.created_at", days[0], days[-1] + DAY_MS)
        where += _only_days(f"c.created_at - c.created_at % {DAY_MS}", days)
        parts.append(self._click_sums(where + ["c.id > ?"], [*params, position], negated=True))
        if queued:
            parts.append(
                self._click_sums(
                    where + ["c.id BETWEEN ? AND ?", "c.id IN (SELECT unnest(CAST(? AS BIGINT[])))"],
                    [*params, min(queued), max(queued), queued],
                    negated=True,
                )
            )
        width = len(self.groups) + (1 if self.bucket else 0)
        keys = [f"k{n}" for n in range(width)]
        sums = [f"m{n}" for n in range(len(CLICK_METRICS))]
        union = " UNION ALL ".join(f"({sql})" for sql, _ in parts)
        sql = (
            f"SELECT {', '.join([*keys, *(f'SUM({m})' for m in sums), _ZERO_CONVERSIONS])} "
            f"FROM ({union}) AS h({', '.join([*keys, *sums])}) GROUP BY {', '.join(keys)} HAVING SUM(m0) > 0"
        )
        return sql, [value for _, part_params in parts for value in part_params]

    def cube_slot(self) -> int | None:
        """The sub id slot the cube is read by for this piece (0: no group or filter of it is a sub id),
        None if the cube cannot answer it: a group or filter it does not keep (stream, offer, device ...),
        two sub id slots, a time bucket other than the UTC day, or no group at all."""
        if self.bucket not in (None, DAY_MS) or not (self.groups or self.bucket):
            return None
        slots = set()
        for name in (*self.groups, *self.filters):
            if name in _CUBE_COLUMNS:
                continue
            if not (name.startswith("sub_id_") and name[7:].isdigit()):
                return None
            slots.add(int(name[7:]))
        if len(slots) > 1:
            return None
        return slots.pop() if slots else 0

    def _cube_select(self, source: int, days: list[int]) -> tuple[str, list]:
        """The cube's sums per group over `days`, read from its slot `source` (0: the totals, whose value
        is '', as every click's of a slot empty that day)."""

        def column(name: str) -> str:
            return _CUBE_COLUMNS.get(name, "q.value")

        select = (["q.day"] if self.bucket else []) + [column(name) for name in self.groups]
        where = ["q.slot = ?", "q.day >= ?", "q.day <= ?", *_only_days("q.day", days)]
        params: list[Any] = [source, days[0], days[-1]]
        for name, values in self.filters.items():
            where.append(f"{column(name)} IN ({', '.join('?' * len(values))})")
            params.extend(values)
        sums = [
            self.money_sum(f"q.{metric}") if metric in MONEY_METRICS else f"SUM(q.{metric})"
            for metric in CUBE_METRICS
        ]
        sql = (
            f"SELECT {', '.join(select + sums)} FROM subid_cube AS q "
            f"WHERE {' AND '.join(where)}{self._group_by()}"
        )
        return sql, params

    def _click_sums(self, where: list[str], params: list, *, negated: bool = False) -> tuple[str, list]:
        """The click sums per group (CLICK_METRICS, no conversion columns) with these conditions; `negated`:
        each sum's negative."""
        select = self._select("c.", "c.created_at")
        sql = (
            f"SELECT {', '.join([*select, self.CLICK_SUMS])} FROM click AS c "
            f"WHERE {' AND '.join(where)}{self._group_by()}"
        )
        if negated:
            width = len(select)
            names = [f"k{n}" for n in range(width)] + [f"m{n}" for n in range(len(CLICK_METRICS))]
            outer = names[:width] + [f"-{name}" for name in names[width:]]
            sql = f"SELECT {', '.join(outer)} FROM ({sql}) AS n({', '.join(names)})"
        return sql, params

    def history_conversions(
        self,
        start: int,
        end: int,
        clicks: tuple[int, list[int]],
        conversions: tuple[int, list[int]],
        click_ids: list[int] | None = None,
    ) -> tuple[str, list]:
        """The conversion piece over the history's own copies: the conversions it answers for (id up to
        `conversions`' position, not queued) whose click it answers for too (`clicks`' position and
        queue), grouped and filtered by that click's copy as the row store's raw piece is by the click.
        `click_ids` (converted_click_ids'): their clicks' ids, as constants DuckDB skips row groups by."""
        where, params = self.where("c.", "cv.click_created_at", start, end, id_prefix="cv.")
        if click_ids is not None:
            # PERF: the join alone reads the click table over the whole range (its filter is only the
            # ids' min and max): 1.2 s at 100 M clicks for all time, 0.22 s with the ids' row groups.
            # Many near each other named as spans (id_ranges); the join keeps the converted clicks only.
            where.append(id_ranges("c.id", click_ids))
        # The click's own time too: zone maps skip the click table's row groups outside the range.
        where += ["c.created_at >= ?", "c.created_at < ?"]
        params += [start, end]
        answered, answered_params = conversions_answered(clicks, conversions)
        return self.conversions_select(where + answered, params + answered_params)

    def history_conversion_clicks(
        self,
        start: int,
        end: int,
        clicks: tuple[int, list[int]],
        conversions: tuple[int, list[int]],
        limit: int,
    ) -> tuple[str, list]:
        """The distinct click ids of the conversions history_conversions reads (by the filters a
        conversion carries; the click's own are the join's), at most `limit` of them."""
        carried = {name: values for name, values in self.filters.items() if name in ID_GROUPS}
        where, params = PieceSql((), carried, None).where(
            "c.", "cv.click_created_at", start, end, id_prefix="cv."
        )
        answered, answered_params = conversions_answered(clicks, conversions)
        where += answered
        return (
            f"SELECT DISTINCT cv.click_id FROM conversion AS cv WHERE {' AND '.join(where)} LIMIT ?",
            [*params, *answered_params, limit],
        )

    def _click_filters(self) -> tuple[list[str], list]:
        """The conditions and values of the filters a conversion does not carry, on the click's copy."""
        where, _ = self.where("c.", "c.created_at", 0, 0)
        # The time bounds (the first two) and the ids were the row store's to apply, on the conversion.
        kept = [
            (condition, values)
            for (name, values), condition in zip(self.filters.items(), where[2:], strict=True)
            if name not in ID_GROUPS
        ]
        return [condition for condition, _ in kept], [value for _, values in kept for value in values]

    def orphan_unconverted_joined(self, click_ids: list[int], currencies: list[str], payouts: list[float]):
        conditions, bound = self._click_filters()
        sql = (
            "SELECT v.currency, COUNT(*), SUM(v.payout) FROM click AS c JOIN (SELECT "
            "unnest(CAST(? AS BIGINT[])) AS click_id, unnest(CAST(? AS VARCHAR[])) AS currency, "
            "unnest(CAST(? AS DOUBLE[])) AS payout) AS v ON c.id = v.click_id"
            + (f" WHERE {' AND '.join(conditions)}" if conditions else "")
            + " GROUP BY 1"
        )
        return sql, [click_ids, currencies, payouts, *bound]

    def clicks_groups(self, click_ids: list[int]) -> tuple[str, list]:
        """Each of these clicks' id and its group values (the time bucket first), of those that pass the
        filters a conversion does not carry."""
        conditions, bound = self._click_filters()
        select = ["c.id", *self._select("c.", "c.created_at")]
        where = ["c.id IN (SELECT unnest(CAST(? AS BIGINT[])))", *conditions]
        return f"SELECT {', '.join(select)} FROM click AS c WHERE {' AND '.join(where)}", [click_ids, *bound]


def answered_by(column: str, position: int, queued: list[int]) -> tuple[list[str], list]:
    """The conditions (and their values) that the id `column` is one the history answers for: up to
    `position`, none of `queued`. PERF: no list condition when none is queued (the usual case between
    appends): DuckDB matched every row of the range against the empty list (a mark join)."""
    if not queued:
        return [f"{column} <= ?"], [position]
    return [f"{column} <= ?", f"{column} NOT IN (SELECT unnest(CAST(? AS BIGINT[])))"], [position, queued]


def conversions_answered(
    clicks: tuple[int, list[int]], conversions: tuple[int, list[int]]
) -> tuple[list[str], list]:
    """The conditions (and their values) that a conversion `cv` is one the history answers for: the
    conversion itself (`conversions`' position and queue) and its click (`clicks`')."""
    where, params = answered_by("cv.id", *conversions)
    click_where, click_params = answered_by("cv.click_id", *clicks)
    return where + click_where, params + click_params


def _cube_sources(
    cube_days: list[tuple[int, int, int]], slot: int, start: int, end: int
) -> list[tuple[int, int]]:
    """(day, the cube slot it is read from) of the days wholly in [start, end) the cube answers for a
    piece by `slot`: the slot where it was kept that day, the totals (0) where it was empty."""
    answered = []
    for day, kept, empty in cube_days:
        if day < start or day + DAY_MS > end:
            continue
        if slot == 0 or kept >> slot & 1:
            answered.append((day, slot))
        elif empty >> slot & 1:
            answered.append((day, 0))
    return answered


def _only_days(expression: str, days: list[int]) -> list[str]:
    """The condition that a day (`expression`, a UTC day's start) is one of these (sorted) days, within
    their first and last: none if they follow each other. PERF: the days as literals (integers of ours),
    which DuckDB filters as constants; a bound list was a hash join on every row (~25 % more CPU)."""
    if days[-1] - days[0] == (len(days) - 1) * DAY_MS:
        return []
    return [f"{expression} IN ({', '.join(str(int(day)) for day in days)})"]


def _uncovered(start: int, end: int, days: list[int]) -> list[tuple[int, int]]:
    """The spans of [start, end) outside these (sorted) days."""
    spans, at = [], start
    for day in days:
        if day > at:
            spans.append((at, day))
        at = day + DAY_MS
    if at < end:
        spans.append((at, end))
    return spans


def cube_days(conn: Any, piece_sql: PieceSql, start: int, end: int) -> list[tuple[int, int, int]] | None:
    """The sub id cube's days of [start, end) if it may answer this piece (None: not, or no cube)."""
    if piece_sql.cube_slot() is None or end - start < DAY_MS:
        return None
    cube = SubidCube(conn)
    if not cube.exists():
        return None
    return cube.days(start, end)


# Converted clicks a conversion piece names as constants at most (more: the join as it is).
CLICK_ID_LIST = 10_000
# Ids nearer than this are one span of id_ranges: about a row group of DuckDB's (122,880 rows, the unit
# its zone maps skip), whose clicks were appended in id order.
SPAN_GAP = 100_000
# Spans are named only if there are this many times fewer of them than ids.
SPAN_SHARE = 8


def id_ranges(column: str, ids: list[int]) -> str:
    """A condition that `column` is one of these (sorted) ids, or in a span that covers some: a superset
    of the ids, as integer constants. PERF: DuckDB's parser and optimizer took ~50 ms of CPU over 7,823
    ids (a campaign's week at 3.2 M clicks), one span of them ~1 ms; but ids far apart are faster named
    each (an IN list skips row groups better than ORed ranges: 30 ids over 100 M clicks, 143 ms of scan
    as spans), so spans only where they are much fewer than the ids (each up to the last id that
    follows within SPAN_GAP)."""
    if not ids:
        return "false"
    spans = [[ids[0], ids[0]]]
    for value in ids[1:]:
        if value - spans[-1][1] > SPAN_GAP:
            spans.append([value, value])
        else:
            spans[-1][1] = value
    if len(spans) * SPAN_SHARE > len(ids):
        return f"{column} IN ({', '.join(str(int(value)) for value in ids)})"
    return "(" + " OR ".join(f"{column} BETWEEN {int(low)} AND {int(high)}" for low, high in spans) + ")"


def converted_click_ids(
    conn: Any,
    piece_sql: PieceSql,
    start: int,
    end: int,
    clicks: tuple[int, list[int]],
    conversions: tuple[int, list[int]],
) -> list[int] | None:
    """The ids of the clicks the piece's conversions join, if few enough to name (else None)."""
    sql, params = piece_sql.history_conversion_clicks(start, end, clicks, conversions, CLICK_ID_LIST + 1)
    ids = sorted(row[0] for row in conn.execute(sql, params).fetchall())
    return ids if len(ids) <= CLICK_ID_LIST else None


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
    piece_sql = PieceSql(groups, filters, bucket)
    days = cube_days(conn, piece_sql, start, end)
    sql, params = piece_sql.history_clicks(start, end, position, queued, days)
    yield from conn.execute(sql, params).fetchall()


def history_converted_rows(
    conn: Any,
    groups: tuple[str, ...],
    filters: dict[str, tuple],
    bucket: int | None,
    start: int,
    end: int,
    *,
    clicks: tuple[int, list[int]],
    conversions: tuple[int, list[int]],
) -> Iterator[tuple]:
    """The conversion sums of [start, end) (their click's time) per group, as ReportStore.rows gives a
    raw piece's, from the conversions (position, queued) and clicks (position, queued) the history
    answers for, joined inside DuckDB."""
    piece_sql = PieceSql(groups, filters, bucket)
    click_ids = converted_click_ids(conn, piece_sql, start, end, clicks, conversions)
    sql, params = piece_sql.history_conversions(start, end, clicks, conversions, click_ids)
    yield from conn.execute(sql, params).fetchall()


def history_conversion_rows(
    conn: Any,
    groups: tuple[str, ...],
    filters: dict[str, tuple],
    bucket: int | None,
    orphans: list[tuple],
) -> Iterator[tuple]:
    """The sums of conversions whose click only the history holds (`orphans`: (click id, the sums of
    CONVERSION_METRICS) each, from the row store) per group of their clicks, as a raw piece's rows."""
    if not orphans:
        return
    # PERF: DuckDB binds a Python list value by value: the ids go in, the clicks' groups come out and
    # meet the sums here (200,000 clicks: 0.40 s; nine lists of sums in, grouped by DuckDB: 0.83 s).
    sums = {row[0]: row[1:] for row in orphans}
    sql, params = PieceSql(groups, filters, bucket).clicks_groups(list(sums))
    for click_id, *key in conn.execute(sql, params).fetchall():
        yield (*key, *_NO_CLICKS, *sums[click_id])


def history_unconverted(
    conn: Any, filters: dict[str, tuple], orphans: list[tuple]
) -> list[tuple[str, int, float]]:
    """(currency, conversions, payout) of the unconverted conversions whose click only the history
    holds (`orphans`: (click id, currency, payout, day) each, from the row store), filtered on their
    clicks."""
    if not orphans:
        return []
    click_ids, currencies, payouts = (
        list(column) for column in zip(*(row[:3] for row in orphans), strict=True)
    )
    sql, params = PieceSql((), filters, None).orphan_unconverted_joined(
        click_ids, currencies, [float(payout or 0) for payout in payouts]
    )
    return conn.execute(sql, params).fetchall()


# -- a report streamed in chunks (models/reporting/reportstream.py) -------------------------------------

QUARTER_HOUR_MS = 15 * 60_000


def _load(conn: Any, table: str, rows: list[tuple]) -> None:
    """Append `rows` to the temporary `table`, a list a column (DuckDB binds a list value as one)."""
    if not rows:
        return
    types = [row[1] for row in conn.execute(f"DESCRIBE {table}").fetchall()]
    columns = [list(column) for column in zip(*rows, strict=True)]
    select = ", ".join(f"unnest(CAST(? AS {kind}[]))" for kind in types)
    conn.execute(f"INSERT INTO {table} SELECT {select}", columns)


@dataclass(frozen=True)
class HistoryPiece:
    """What a report summed by DuckDB reads (stream_groups, page_groups): its `groups`, `filters`, time
    `bucket` and range [`start`, `end`); the clicks the history answers for (`clicks`: ids up to its
    position, none of its queue) and its conversions likewise (`conversions`);
    `rest`, the row store's rows of the same piece (its clicks and conversions the history does not
    answer for, and of those the ones whose click only the history holds), each (group values, the
    sums of METRICS); `label_of`, a time bucket's label (with `bucket`); `parents`, per key position a
    value's parent's id (offer -> network), so the key is the report's before the sums are taken."""

    groups: tuple[str, ...]
    filters: dict[str, tuple]
    bucket: int | None
    start: int
    end: int
    clicks: tuple[int, list[int]]
    conversions: tuple[int, list[int]]
    rest: list[tuple]
    label_of: Callable[[int], str]
    parents: dict[int, dict[int, int | None]]


def stream_groups(conn: Any, piece: HistoryPiece, *, chunk: int = 10_000) -> Iterator[tuple]:
    """The report's rows, summed by DuckDB and fetched `chunk` at a time: the history's clicks and
    conversions it answers for plus the row store's rest (`piece`). With a time bucket, the first value
    is its label; a key with parents is the parent's id: DuckDB groups once, the result stays in it."""
    summed = _summed(conn, piece)
    # PERF: a count summed as a DOUBLE (exact below 2**53), not DuckDB's 128-bit integer sum: half the
    # state per group of a million-group report. The caller makes counts integers again.
    sums = ", ".join(f"SUM(CAST(u.m{n} AS DOUBLE))" for n in range(len(base.METRICS)))
    group_by = f" GROUP BY {', '.join(summed.keys)}" if summed.keys else ""
    order_by = f" ORDER BY {', '.join(f'{o} NULLS FIRST' for o in summed.order)}" if summed.order else ""
    # Run now (DuckDB sums and sorts here, within its memory_limit, spilling past it): a failure is
    # the caller's to answer before the first row goes out.
    cursor = conn.execute(
        f"SELECT {', '.join([*summed.keys, sums])} FROM {summed.source}{group_by}{order_by}", summed.params
    )
    return _fetched(cursor, chunk)


@dataclass(frozen=True)
class _Summed:
    """What a report's rows are summed from inside DuckDB: `source`, the history's piece and the row
    store's rest (temporary tables loaded) with the joins that make the report's keys; `keys`, the
    expressions grouped by (a time label, a parent's id); `order`, each key's order (a label by its
    first bucket)."""

    source: str
    params: list
    keys: list[str]
    order: list[str]


def _summed(conn: Any, piece: HistoryPiece) -> _Summed:
    groups, bucket, start, end, clicks = piece.groups, piece.bucket, piece.start, piece.end, piece.clicks
    piece_sql = PieceSql(groups, piece.filters, bucket)
    clicks_sql, params = piece_sql.history_clicks(start, end, *clicks, cube_days(conn, piece_sql, start, end))
    click_ids = converted_click_ids(conn, piece_sql, start, end, clicks, piece.conversions)
    converted_sql, converted_params = piece_sql.history_conversions(
        start, end, clicks, piece.conversions, click_ids
    )
    sql, params = f"{clicks_sql} UNION ALL {converted_sql}", [*params, *converted_params]
    width = len(groups) + (1 if bucket else 0)
    names = [f"k{n}" for n in range(width)] + [f"m{n}" for n in range(len(base.METRICS))]
    # The metrics typed as the row store's sums are (a piece's sums of the other kind are the literal 0).
    typed = [f"k{n}" for n in range(width)] + [
        f"CAST(m{n} AS {'DOUBLE' if metric in MONEY_METRICS else 'BIGINT'}) AS m{n}"
        for n, metric in enumerate(base.METRICS)
    ]
    history = f"SELECT {', '.join(typed)} FROM ({sql}) AS h({', '.join(names)})"
    source = f"({history}"
    if piece.rest:
        # PERF: the table typed by DESCRIBE, which only binds the piece (0.5 ms): DuckDB ran all of it
        # for a CREATE TABLE AS ... LIMIT 0 (50 ms of CPU, a campaign's 7-day zones at 3.2 M clicks).
        columns = [
            f'"{name}" {kind}' for name, kind, *_ in conn.execute(f"DESCRIBE {history}", params).fetchall()
        ]
        conn.execute(f"CREATE OR REPLACE TEMP TABLE report_rest ({', '.join(columns)})")
        for offset in range(0, len(piece.rest), 50_000):
            _load(conn, "report_rest", piece.rest[offset : offset + 50_000])
        source += " UNION ALL SELECT * FROM report_rest"
    joins, keys, order = [], [f"u.k{n}" for n in range(width)], [f"u.k{n}" for n in range(width)]
    if bucket:
        conn.execute(
            "CREATE OR REPLACE TEMP TABLE report_bucket (bucket BIGINT, label VARCHAR, first BIGINT)"
        )
        buckets = {
            row[0]
            for row in conn.execute(
                f"SELECT DISTINCT created_at - created_at % {int(bucket)} FROM click "
                "WHERE created_at >= ? AND created_at < ?",
                [start, end],
            ).fetchall()
        } | {row[0] for row in piece.rest}
        labels = [(moment, piece.label_of(moment)) for moment in sorted(buckets)]
        firsts: dict[str, int] = {}
        for moment, label in labels:
            firsts.setdefault(label, moment)
        _load(conn, "report_bucket", [(moment, label, firsts[label]) for moment, label in labels])
        joins.append("JOIN report_bucket AS b ON b.bucket = u.k0")
        keys[0], order[0] = "b.label", "MIN(b.first)"
    for position_, parent_of in piece.parents.items():
        table = f"report_parent_{position_}"
        conn.execute(f"CREATE OR REPLACE TEMP TABLE {table} (child BIGINT, parent BIGINT)")
        _load(conn, table, list(parent_of.items()))
        joins.append(f"LEFT JOIN {table} AS p{position_} ON p{position_}.child = u.k{position_}")
        keys[position_] = order[position_] = f"p{position_}.parent"
    source += f") AS u {' '.join(joins)}"
    return _Summed(source, params, keys, order)


def _fetched(cursor: Any, chunk: int) -> Iterator[tuple]:
    while batch := cursor.fetchmany(chunk):
        yield from batch


def history_unconverted_rows(
    conn: Any,
    groups: tuple[str, ...],
    filters: dict[str, tuple],
    bucket: int | None,
    orphans: list[tuple],
) -> Iterator[tuple]:
    """ReportStore.rows("unconverted")'s rows for the unconverted conversions whose click only the
    history holds (`orphans`: (click id, currency, payout, day) each, from the row store), grouped by
    the history's copy of their click: one row per conversion (the caller sums them)."""
    if not orphans:
        return
    by_click: dict[int, list[tuple]] = {}
    for click_id, currency, payout, day_ms in orphans:
        by_click.setdefault(click_id, []).append((currency, day_ms, 1, float(payout or 0)))
    sql, params = PieceSql(groups, filters, bucket).clicks_groups(list(by_click))
    for click_id, *key in conn.execute(sql, params).fetchall():
        for conversion in by_click[click_id]:
            yield (*key, *conversion)


# -- one page of a report, sorted and cut inside DuckDB (models/reporting/reportpage.py) ----------------

GROUP_KEY = "group"
# A report row's metrics as models/reporting/reports.py `_row` computes them, over the summed columns
# (named as METRICS): rounded alike, a ratio NULL where its denominator is 0, so DuckDB sorts by the
# values the page shows. An amount that is not finite is NULL, as the row's None (sorted last).
_CONVERSIONS = "(leads + sales + rebills)"
_REVENUE = "ROUND(revenue, 6)"
_COST = "ROUND(click_cost + conversion_cost, 6)"
_PROFIT = f"ROUND({_REVENUE} - {_COST}, 6)"


def _ratio_sql(numerator: str, denominator: str, scale: float = 1.0) -> str:
    return f"CASE WHEN {denominator} <> 0 THEN ROUND({numerator} / {denominator} * {scale}, 4) END"


ROW_SQL = {
    "clicks": "clicks",
    "unique_clicks": "unique_campaign",
    "unique_global": "unique_global",
    "unique_stream": "unique_stream",
    "bots": "bots",
    "conversions": _CONVERSIONS,
    "leads": "leads",
    "sales": "sales",
    "rejected": "rejected",
    "trash": "trash",
    "rebills": "rebills",
    "cr": _ratio_sql(_CONVERSIONS, "clicks", 100.0),
    "revenue": _REVENUE,
    "revenue_pending": "ROUND(revenue_pending, 6)",
    "cost": _COST,
    "profit": _PROFIT,
    "roi": _ratio_sql(_PROFIT, _COST, 100.0),
    "epc": _ratio_sql(_REVENUE, "clicks"),
    "cpc": _ratio_sql(_COST, "clicks"),
    "cpa": _ratio_sql(_COST, _CONVERSIONS),
    "lp_views": "lp_views",
    "lp_clicks": "lp_clicks",
    "lp_ctr": _ratio_sql("lp_clicks", "lp_views", 100.0),
}
ROW_AMOUNTS = ("revenue", "revenue_pending", "cost", "profit", "roi", "epc", "cpc", "cpa")
PAGE_SORTS = (*ROW_SQL, GROUP_KEY)
# A text value is its own label but for these (the caller's label function names them): none, empty,
# and any with a letter outside ASCII, where lower() and Python's casefold() may differ.
_ODD_TEXT = "k{n} IS NULL OR k{n} = '' OR NOT regexp_full_match(k{n}, '[\\x00-\\x7F]*')"


@dataclass(frozen=True)
class PageAsk:
    """What a page is: `sort`, (a ROW_SQL metric or GROUP_KEY, descending) keys in turn, ties in the
    report's own order (`base`: key positions in the query's column order); the rows from `offset`,
    `limit` of them; `kinds`: per key position "time" (a label), "id" or "text"; `label`: a key value's
    label for GROUP_KEY (one group only); `without`: keys (every position) of rows to sum apart;
    `where`: only the rows that may pass these comparisons (the count and totals are every row's)."""

    sort: tuple[tuple[str, bool], ...]
    limit: int
    offset: int
    kinds: tuple[str, ...]
    base: tuple[int, ...]
    label: Any = None
    without: tuple[tuple, ...] = ()
    where: tuple[tuple[str, str, float], ...] = ()  # (metric, operator, value): MAY_PASS's superset.


@dataclass
class PageFound:
    """The page's rows (key values, then the sums of METRICS), the number of rows, the sums over them
    all, whether a row has an amount that is not finite, and the `without` rows found (as `rows`)."""

    rows: list[tuple]
    count: int
    totals: list[float]
    has_non_finite: bool
    without: list[tuple]


def page_groups(conn: Any, piece: HistoryPiece, ask: PageAsk) -> PageFound:
    """One page of the report stream_groups sums (the same pieces, keys and sums), its rows in the order
    `ask` gives, with the count of every row and their sums: DuckDB sums, sorts and cuts, so the
    caller makes only the rows shown."""
    named = [key for key, _ in ask.sort] + [metric for metric, _, _ in ask.where]
    if any(name not in PAGE_SORTS for name in named):  # They name SQL columns: only known ones.
        raise ValueError(f"a page sorts and keeps rows by {', '.join(PAGE_SORTS)}, not {named}")
    summed = _summed(conn, piece)
    width = len(summed.keys)
    metric_names = list(base.METRICS)
    sums = ", ".join(f"SUM(CAST(u.m{n} AS DOUBLE)) AS {name}" for n, name in enumerate(metric_names))
    keys = ", ".join(f"{key} AS k{n}" for n, key in enumerate(summed.keys))
    first = f"{summed.order[0]} AS t, " if piece.bucket else ""
    group_by = f" GROUP BY {', '.join(summed.keys)}" if summed.keys else ""
    conn.execute(
        f"CREATE OR REPLACE TEMP TABLE report_page AS SELECT {keys + ', ' if keys else ''}{first}{sums} "
        f"FROM {summed.source}{group_by}",
        summed.params,
    )
    if not width:  # No group: DuckDB's one row, of no clicks when there were none (run_report has none).
        conn.execute(
            f"DELETE FROM report_page WHERE {' AND '.join(f'COALESCE({m}, 0) = 0' for m in metric_names)}"
        )
    joins, labelled, label_position = "", "", 0
    if any(key == GROUP_KEY for key, _ in ask.sort):
        label_position = _load_labels(conn, ask)
        joins = f" LEFT JOIN report_label AS l ON l.value IS NOT DISTINCT FROM p.k{label_position}"
        labelled = "l.label, l.folded, "
    derived = ", ".join(
        f"CASE WHEN isfinite({sql}) THEN {sql} END AS r_{name}"
        if name in ROW_AMOUNTS
        else f"{sql} AS r_{name}"
        for name, sql in ROW_SQL.items()
    )
    finite = " AND ".join(f"COALESCE(isfinite({ROW_SQL[name]}), true)" for name in ROW_AMOUNTS)
    rows = f"(SELECT p.*, {labelled}{derived}, NOT ({finite}) AS r_bad FROM report_page AS p{joins}) AS r"
    order = []
    for key, is_descending in ask.sort:
        direction = "DESC" if is_descending else "ASC"
        if key != GROUP_KEY:
            order += [f"r.r_{key} IS NULL", f"r.r_{key} {direction}"]
        elif ask.kinds[label_position] == "time":
            order.append(f"r.t {direction}")
        else:
            shown = f"COALESCE(r.label, CAST(r.k{label_position} AS VARCHAR))"
            order += [f"COALESCE(r.folded, lower({shown})) {direction}", f"{shown} {direction}"]
    for position_ in ask.base:  # run_report's order: numbers before text, None as the text 'None'.
        kind = ask.kinds[position_]
        if kind == "time":
            order.append("r.t")
        elif kind == "id":
            order += [f"r.k{position_} IS NULL", f"r.k{position_}"]
        else:
            order.append(f"COALESCE(r.k{position_}, 'None')")
    columns = ", ".join([*(f"r.k{n}" for n in range(width)), *(f"r.{name}" for name in metric_names)])
    where, bound = [], []
    for metric, operator, value in ask.where:
        low, high = may_pass(operator, value)
        where.append(f"r.r_{metric} BETWEEN ? AND ?")
        bound += [low, high]
    found = conn.execute(
        f"SELECT {columns} FROM {rows}{' WHERE ' + ' AND '.join(where) if where else ''} "
        f"ORDER BY {', '.join(order) or '1'} LIMIT ? OFFSET ?",
        [*bound, ask.limit, ask.offset],
    ).fetchall()
    count, bad, *totals = conn.execute(
        f"SELECT COUNT(*), COALESCE(bool_or(r.r_bad), false), "
        f"{', '.join(f'COALESCE(SUM(r.{name}), 0)' for name in metric_names)} FROM {rows}"
    ).fetchone()
    without: list[tuple] = []
    if ask.without:
        conn.execute(
            "CREATE OR REPLACE TEMP TABLE report_without AS SELECT "
            f"{', '.join(f'k{n}' for n in range(width))} FROM report_page LIMIT 0"
        )
        _load(conn, "report_without", list(ask.without))
        matched = " AND ".join(f"w.k{n} IS NOT DISTINCT FROM p.k{n}" for n in range(width))
        without = conn.execute(
            f"SELECT {', '.join([*(f'p.k{n}' for n in range(width)), *(f'p.{m}' for m in metric_names)])} "
            f"FROM report_page AS p WHERE EXISTS (SELECT 1 FROM report_without AS w WHERE {matched})"
        ).fetchall()
    return PageFound(found, int(count), list(totals), bool(bad), without)


def may_pass(operator: str, value: float) -> tuple[float, float]:
    """The range a row's value (rounded as shown) is in if it may pass `operator` `value`: a little
    wider than exact (DuckDB's ROUND and Python's round() can part in the last digit), so a caller that
    checks the rows it gets misses none."""
    slack = 1e-6 * max(1.0, abs(value))
    low = value - slack if operator in (">=", ">", "=") else -math.inf
    high = value + slack if operator in ("<=", "<", "=") else math.inf
    return low, high


def _load_labels(conn: Any, ask: PageAsk) -> int:
    """The labels of the one key sorted by its label (`ask.label` of its values: an id key's every
    value, a text key's odd ones), with their casefold(), in `report_label`; the key's position."""
    if len(ask.kinds) != 1:
        raise ValueError("a page sorts by the group's label with one group only")
    kind = ask.kinds[0]
    conn.execute(
        "CREATE OR REPLACE TEMP TABLE report_label AS SELECT k0 AS value, "
        "CAST(NULL AS VARCHAR) AS label, CAST(NULL AS VARCHAR) AS folded FROM report_page LIMIT 0"
    )
    if kind == "time":
        return 0
    odd = "true" if kind == "id" else _ODD_TEXT.format(n=0)
    values = [row[0] for row in conn.execute(f"SELECT DISTINCT k0 FROM report_page WHERE {odd}").fetchall()]
    labelled = [(value, label, label.casefold()) for value in values for label in (ask.label(value),)]
    _load(conn, "report_label", labelled)
    return 0
