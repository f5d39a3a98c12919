"""The columnar history's table and statements (DuckDB): its schema, the append of a chunk of clicks
in one transaction with the position it reaches, and the sums `lanner analytics verify` compares.

- `click`: one row a landed click, without ip and user agent (no report reads them); referrer_domain
  instead of the referrer (the reports' function, computed at copy). No primary key and no index: an
  ART index over 100 M ids is too big; each id is copied once because the position moves with it.
  Each appended chunk is sorted by (campaign_id, created_at), so DuckDB's zone maps skip row groups
  outside a campaign's range.
- `history_meta (key, value)`: `position`, the highest click id copied (moved in the same transaction
  as the rows: a kill at any instant neither loses nor duplicates one); `complete_from` (Unix ms,
  absent: 0), before which the file may lack clicks: made or filled again from a row store that
  `lanner prune` had emptied before then, it could not copy them.
- `conversion` (issue 28 point 1): one row a conversion (CONVERSION_COLUMNS: what a report sums, with
  its click's id and time; the click's other dimensions are the `click` table's), appended and copied
  again as clicks are, keyed by id: `history_meta.conversion_position` moves in the same transaction as
  its rows, a changed conversion is deleted and inserted again (a deleted one only deleted).
- PERF: rows go in as a temporary CSV file read by read_csv with explicit types (~6 µs a click of
  six columns measured, ~2 µs per text column more); executemany was ~4 ms a row. `\\N` is NULL only
  in the integer columns (the text columns are NOT NULL in the row store: force_not_null).
- PERF: a list of ids is matched as `id IN (SELECT unnest(?))`, a hash join; `list_contains(?, id)`
  looked through the list for every row: 60 s against 0.15 s for 50,000 ids over a million rows.
"""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.store.duckdb.connection import transaction
from models.store.duckdb.subidcube import DAY_MS, SUMMED_COLUMNS, SubidCube
from models.store.history import CONVERSION_COLUMNS, ROW_COLUMNS
from models.tables.click import ROUTING_COLUMNS, SUB_ID_COLUMNS

# Each history column with its DuckDB type.
COLUMN_TYPES: dict[str, str] = {
    "id": "BIGINT",
    "created_at": "BIGINT",
    "campaign_id": "INTEGER",
    "stream_id": "INTEGER",
    "offer_id": "INTEGER",
    "lander_id": "INTEGER",
    "lp_clicked_at": "BIGINT",
    "domain": "VARCHAR",
    "referrer_domain": "VARCHAR",
    "source": "VARCHAR",
    "cost": "DOUBLE",
    "is_unique_global": "TINYINT",
    "is_unique_campaign": "TINYINT",
    "is_unique_stream": "TINYINT",
    "is_bot": "TINYINT",
    "visitor_key": "BIGINT",
    **dict.fromkeys(SUB_ID_COLUMNS, "VARCHAR"),
    **dict.fromkeys(ROUTING_COLUMNS, "VARCHAR"),
    "subid": "VARCHAR",
}
CONVERSION_TYPES: dict[str, str] = {
    "id": "BIGINT",
    "click_id": "BIGINT",
    "click_created_at": "BIGINT",
    "created_at": "BIGINT",
    "campaign_id": "INTEGER",
    "stream_id": "INTEGER",
    "offer_id": "INTEGER",
    "status": "VARCHAR",
    "payout": "DOUBLE",
    "currency": "VARCHAR",
    "report_payout": "DOUBLE",
    "cost": "DOUBLE",
}
assert tuple(CONVERSION_TYPES) == CONVERSION_COLUMNS
HISTORY_COLUMNS = tuple(COLUMN_TYPES)
assert HISTORY_COLUMNS == tuple("referrer_domain" if c == "referrer" else c for c in ROW_COLUMNS)
TEXT_COLUMNS = tuple(c for c, kind in COLUMN_TYPES.items() if kind == "VARCHAR")
NULL = "\\N"
HOUR_MS = 3_600_000

_COLUMNS_SQL = ", ".join(HISTORY_COLUMNS)
_CSV_TYPES = "{" + ", ".join(f"'{c}': '{t}'" for c, t in COLUMN_TYPES.items()) + "}"
_NOT_NULL = "[" + ", ".join(f"'{c}'" for c in TEXT_COLUMNS) + "]"


def _read_csv(types: dict[str, str]) -> str:
    """DuckDB's read_csv of a file written by `_write_csv` with these columns (its text ones NOT NULL)."""
    columns = "{" + ", ".join(f"'{c}': '{t}'" for c, t in types.items()) + "}"
    not_null = "[" + ", ".join(f"'{c}'" for c, t in types.items() if t == "VARCHAR") + "]"
    return (
        "read_csv(?, header = false, auto_detect = false, delim = ',', quote = '\"', escape = '\"', "
        f"new_line = '\\n', nullstr = '{NULL}', force_not_null = {not_null}, columns = {columns})"
    )


_CONVERSION_COLUMNS_SQL = ", ".join(CONVERSION_COLUMNS)


class ColumnarHistory:
    """The history's statements over one DuckDB connection (models/store/duckdb/connection.py opens it)."""

    SQL_SCHEMA = (
        "CREATE TABLE IF NOT EXISTS click ("
        + ", ".join(f"{column} {kind}" for column, kind in COLUMN_TYPES.items())
        + ")",
        "CREATE TABLE IF NOT EXISTS history_meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL)",
        "INSERT INTO history_meta (key, value) VALUES ('position', 0) ON CONFLICT (key) DO NOTHING",
        # A file made before the subid was copied: its rows have none (NULL), so `prune_held_clicks`
        # refuses them until `lanner analytics rebuild` makes the file again.
        "ALTER TABLE click ADD COLUMN IF NOT EXISTS subid VARCHAR",
        # A file made before conversions were copied gets them from the next append (position 0).
        "CREATE TABLE IF NOT EXISTS conversion ("
        + ", ".join(f"{column} {kind}" for column, kind in CONVERSION_TYPES.items())
        + ")",
        "INSERT INTO history_meta (key, value) VALUES ('conversion_position', 0) "
        "ON CONFLICT (key) DO NOTHING",
    )
    # NULL in a file no append has opened since conversions were copied (its row and table come together).
    SQL_CONVERSION_POSITION = "SELECT MAX(value) FROM history_meta WHERE key = 'conversion_position'"
    SQL_SET_CONVERSION_POSITION = "UPDATE history_meta SET value = ? WHERE key = 'conversion_position'"
    SQL_INSERT_CONVERSIONS = (
        f"INSERT INTO conversion ({_CONVERSION_COLUMNS_SQL}) SELECT {_CONVERSION_COLUMNS_SQL} FROM "
        f"{_read_csv(CONVERSION_TYPES)} ORDER BY campaign_id, click_created_at"
    )
    SQL_DELETE_CONVERSIONS = "DELETE FROM conversion WHERE id IN (SELECT unnest(CAST(? AS BIGINT[])))"
    SQL_DELETE_CONVERSION_HOUR = (
        "DELETE FROM conversion WHERE click_created_at >= ? AND click_created_at < ? AND id <= ?"
    )
    SQL_DELETE_CONVERSIONS_AFTER = "DELETE FROM conversion WHERE id > ?"
    SQL_CONVERSION_BY_ID = "SELECT click_id, created_at FROM conversion WHERE id = ?"
    SQL_CONVERSION_COUNT = "SELECT COUNT(*) FROM conversion"
    # Per hour of the click and currency: conversions, payout and report payout, of the conversions up
    # to an id but those given.
    SQL_CONVERSION_HOURS = (
        f"SELECT click_created_at - click_created_at % {HOUR_MS} AS hour, currency, COUNT(*), "
        "COALESCE(SUM(payout), 0), COALESCE(SUM(report_payout), 0) FROM conversion "
        "WHERE id <= ? AND id NOT IN (SELECT unnest(CAST(? AS BIGINT[]))) GROUP BY hour, currency"
    )
    SQL_POSITION = "SELECT value FROM history_meta WHERE key = 'position'"
    SQL_COMPLETE_FROM = "SELECT COALESCE(MAX(value), 0) FROM history_meta WHERE key = 'complete_from'"
    SQL_SET_COMPLETE_FROM = (
        "INSERT INTO history_meta (key, value) VALUES ('complete_from', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = greatest(history_meta.value, excluded.value)"
    )
    SQL_SET_POSITION = "UPDATE history_meta SET value = ? WHERE key = 'position'"
    SQL_DELETE = "DELETE FROM click WHERE id IN (SELECT unnest(CAST(? AS BIGINT[])))"
    SQL_DELETE_HOUR = "DELETE FROM click WHERE created_at >= ? AND created_at < ? AND id <= ?"
    SQL_INSERT = (
        f"INSERT INTO click ({_COLUMNS_SQL}) SELECT {_COLUMNS_SQL} FROM read_csv(?, header = false, "
        f"auto_detect = false, delim = ',', quote = '\"', escape = '\"', new_line = '\\n', "
        f"nullstr = '{NULL}', force_not_null = {_NOT_NULL}, columns = {_CSV_TYPES}) "
        "ORDER BY campaign_id, created_at"
    )
    SQL_COUNT = "SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM click"
    SQL_COUNT_UP_TO = "SELECT COUNT(*) FROM click WHERE id <= ?"
    SQL_DELETE_AFTER = "DELETE FROM click WHERE id > ?"
    SQL_KEPT_COLUMNS = (
        "SELECT column_name FROM duckdb_columns() WHERE database_name = 'kept' AND table_name = 'click'"
    )
    # Per hour: clicks and their cost, of the clicks up to an id but those given.
    SQL_HOURS = (
        f"SELECT created_at - created_at % {HOUR_MS} AS hour, COUNT(*), COALESCE(SUM(cost), 0) FROM click "
        "WHERE id <= ? AND id NOT IN (SELECT unnest(CAST(? AS BIGINT[]))) GROUP BY hour"
    )

    # Of the ids given (between their lowest and highest, so zone maps skip the rest), how many the
    # history holds with their subid (a row copied before the subid was: NULL).
    SQL_COUNT_HELD = (
        "SELECT COUNT(DISTINCT id) FROM click WHERE id BETWEEN ? AND ? "
        "AND id IN (SELECT unnest(CAST(? AS BIGINT[]))) AND subid IS NOT NULL"
    )
    SQL_BY_SUBID = f"SELECT {_COLUMNS_SQL} FROM click WHERE subid = ? ORDER BY id LIMIT 1"
    SQL_BY_IDS = (
        f"SELECT {_COLUMNS_SQL} FROM click WHERE id BETWEEN ? AND ? "
        "AND id IN (SELECT unnest(CAST(? AS BIGINT[]))) ORDER BY id"
    )

    __slots__ = ("conn", "scratch")

    def __init__(self, conn: Any, scratch: Path) -> None:
        """`scratch`: the directory of the temporary CSV files (the history's own: the same disk)."""
        self.conn = conn
        self.scratch = scratch

    def create(self) -> None:
        for statement in self.SQL_SCHEMA:
            self.conn.execute(statement)
        SubidCube(self.conn).create()

    def position(self) -> int:
        return self.conn.execute(self.SQL_POSITION).fetchone()[0]

    def complete_from(self) -> int:
        """Unix ms before which the file may lack clicks (0: it lacks none)."""
        return self.conn.execute(self.SQL_COMPLETE_FROM).fetchone()[0]

    def mark_complete_from(self, cutoff_ms: int) -> None:
        """Record that clicks before `cutoff_ms` may be missing (it only moves forward)."""
        self.conn.execute(self.SQL_SET_COMPLETE_FROM, (cutoff_ms,))

    def conversion_position(self) -> int | None:
        """The highest conversion id copied; None if the file has no conversions yet (made before they
        were copied, and not appended to since)."""
        return self.conn.execute(self.SQL_CONVERSION_POSITION).fetchone()[0]

    def conversion_count(self) -> int | None:
        if self.conversion_position() is None:
            return None
        return self.conn.execute(self.SQL_CONVERSION_COUNT).fetchone()[0]

    def conversion_at(self, conversion_id: int) -> tuple[int, int] | None:
        """(click id, created_at) of the conversion with this id, None if the history has none."""
        return self.conn.execute(self.SQL_CONVERSION_BY_ID, (conversion_id,)).fetchone()

    def append_conversions(
        self,
        rows: list[tuple],
        position: int | None,
        replace: list[int] | None = None,
        hour: tuple[int, int] | None = None,
    ) -> None:
        """In one transaction: drop the conversions `replace` names (those the row store no longer has
        stay dropped), or with `hour` (start, up to id) those of that hour's clicks, insert `rows`
        (CONVERSION_COLUMNS) and set the conversion position."""
        self._replace_rows(
            (
                self.SQL_DELETE_CONVERSIONS,
                self.SQL_DELETE_CONVERSION_HOUR,
                self.SQL_INSERT_CONVERSIONS,
                self.SQL_SET_CONVERSION_POSITION,
            ),
            rows,
            position,
            replace,
            hour,
        )

    def cut_back_conversions(self, position: int) -> int:
        """Forget the conversions past an id and set the conversion position to it, in one transaction."""
        with self._transaction():
            gone = self.conn.execute(self.SQL_DELETE_CONVERSIONS_AFTER, (position,)).fetchone()[0]
            self.conn.execute(self.SQL_SET_CONVERSION_POSITION, (position,))
        return gone

    def conversion_hours(self, up_to: int, leave_out: list[int]) -> list[tuple[int, str, int, float, float]]:
        """(hour of the click, currency, conversions, payout, report payout) of the conversions up to an
        id, but those in `leave_out`."""
        return self.conn.execute(self.SQL_CONVERSION_HOURS, (up_to, list(leave_out))).fetchall()

    def count(self) -> tuple[int, int | None, int | None]:
        """(clicks, first created_at, last created_at)."""
        return self.conn.execute(self.SQL_COUNT).fetchone()

    def append(
        self,
        rows: list[tuple],
        position: int | None,
        replace: list[int] | None = None,
        hour: tuple[int, int] | None = None,
    ) -> None:
        """In one transaction: drop the clicks `replace` names (or, with `hour` (start, up to id), that
        hour's), insert `rows` (HISTORY_COLUMNS), and set the position; the sub id cube's days these
        change are marked stale in it (models/store/duckdb/subidcube.py)."""
        statements = (self.SQL_DELETE, self.SQL_DELETE_HOUR, self.SQL_INSERT, self.SQL_SET_POSITION)
        created = HISTORY_COLUMNS.index("created_at")
        summed = [HISTORY_COLUMNS.index(column) for column in SUMMED_COLUMNS]

        def mark_cube() -> None:
            cube = SubidCube(self.conn)
            replaced = set(replace or [])
            # A copy again marks its day only if what the cube sums of it changed; a new click always.
            new = {row[0]: tuple(row[i] for i in summed) for row in rows if row[0] in replaced}
            cube.mark_changed(sorted(replaced), new)
            days = {row[created] - row[created] % DAY_MS for row in rows if row[0] not in replaced}
            if hour is not None:
                days.add(hour[0] - hour[0] % DAY_MS)
            cube.mark_days(sorted(days))

        self._replace_rows(statements, rows, position, replace, hour, mark_cube)

    def _replace_rows(
        self,
        statements: tuple[str, str, str, str],
        rows: list[tuple],
        position: int | None,
        replace: list[int] | None,
        hour: tuple[int, int] | None,
        before: Callable[[], None] | None = None,
    ) -> None:
        """One table's append: its (delete by ids, delete an hour, insert from a CSV file, set the
        position) statements in one transaction, after `before` (in it)."""
        delete, delete_hour, insert, set_position = statements
        scratch = None
        try:
            if rows:
                scratch = self._write_csv(rows)
            with self._transaction():
                if before is not None:
                    before()
                if replace:
                    self.conn.execute(delete, (list(replace),))
                if hour is not None:
                    self.conn.execute(delete_hour, (hour[0], hour[0] + HOUR_MS, hour[1]))
                if scratch is not None:
                    self.conn.execute(insert, (str(scratch),))
                if position is not None:
                    self.conn.execute(set_position, (position,))
        finally:
            if scratch is not None:
                scratch.unlink(missing_ok=True)

    def _transaction(self) -> contextlib.AbstractContextManager[None]:
        return transaction(self.conn)

    def _write_csv(self, rows: list[tuple]) -> Path:
        fd, name = tempfile.mkstemp(prefix="append-", suffix=".csv", dir=self.scratch)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerows([NULL if value is None else value for value in row] for row in rows)
        return Path(name)

    def carry_over(self, old: Path, up_to: int) -> int:
        """Copy in, in one transaction, the clicks up to an id that another history file (the one a
        rebuild replaces) holds and this one lacks: those only it had (pruned from the row store), and
        its `complete_from`. A file made before the subid was copied gives them none. HistoryUnreadable
        if it cannot be read."""
        import duckdb

        from models.store.duckdb.connection import HistoryUnreadable

        literal = str(old).replace("'", "''")  # ATTACH takes no parameter.
        try:
            self.conn.execute(f"ATTACH '{literal}' AS kept (READ_ONLY)")
        except duckdb.Error as error:
            raise HistoryUnreadable(old, error) from error
        try:
            present = {row[0] for row in self.conn.execute(self.SQL_KEPT_COLUMNS).fetchall()}
            select = ", ".join(c if c in present else f"NULL AS {c}" for c in HISTORY_COLUMNS)
            with self._transaction():
                carried = self.conn.execute(
                    f"INSERT INTO click ({_COLUMNS_SQL}) SELECT {select} FROM kept.click "
                    "WHERE id <= ? AND id NOT IN (SELECT id FROM click) ORDER BY campaign_id, created_at",
                    (up_to,),
                ).fetchone()[0]
                if carried:  # Into days the cube may hold (a rebuild builds it after): all of them stale.
                    SubidCube(self.conn).mark_all()
                # What the old file lacked (made again after a prune), this one lacks too.
                kept_from = self.conn.execute(
                    "SELECT COALESCE(MAX(value), 0) FROM kept.history_meta WHERE key = 'complete_from'"
                ).fetchone()[0]
                if kept_from:
                    self.mark_complete_from(kept_from)
        except duckdb.Error as error:
            raise HistoryUnreadable(old, error) from error
        finally:
            self.conn.execute("DETACH kept")
        return carried

    def cut_back(self, position: int) -> int:
        """Forget the clicks past an id and set the position to it, in one transaction (a restored
        database that ends before them hands their ids out again); how many went."""
        with self._transaction():
            SubidCube(self.conn).mark_after(position)
            gone = self.conn.execute(self.SQL_DELETE_AFTER, (position,)).fetchone()[0]
            self.conn.execute(self.SQL_SET_POSITION, (position,))
        return gone

    def count_up_to(self, position: int) -> int:
        return self.conn.execute(self.SQL_COUNT_UP_TO, (position,)).fetchone()[0]

    def count_held(self, click_ids: list[int]) -> int:
        """How many of these clicks the history holds, with their subid."""
        if not click_ids:
            return 0
        return self.conn.execute(self.SQL_COUNT_HELD, (min(click_ids), max(click_ids), click_ids)).fetchone()[
            0
        ]

    def click_by_subid(self, subid: str) -> tuple | None:
        """The click (HISTORY_COLUMNS) with this subid, None if the history has none.
        PERF: no index; the subid starts with its time, so VARCHAR zone maps skip most row groups
        (about 5 ms over a million clicks)."""
        return self.conn.execute(self.SQL_BY_SUBID, (subid,)).fetchone()

    def clicks_by_ids(self, click_ids: list[int]) -> list[tuple]:
        """The clicks (HISTORY_COLUMNS) with these ids that the history holds, by id."""
        if not click_ids:
            return []
        return self.conn.execute(self.SQL_BY_IDS, (min(click_ids), max(click_ids), click_ids)).fetchall()

    def log(
        self,
        equal: dict[str, Any],
        *,
        before_ms: int,
        since_ms: int | None,
        until_ms: int | None,
        cursor: tuple[int, int] | int | None,
        by_time: bool,
        limit: int,
    ) -> list[tuple]:
        """The newest clicks (HISTORY_COLUMNS) created before `before_ms` with these column values, in the
        click log's order: (created_at, id) newest first when `by_time`, else id; after `cursor` in it."""
        where, params = ["created_at < ?"], [before_ms]
        for column, value in equal.items():
            assert column in COLUMN_TYPES, column  # A column name cannot be a parameter: only ours.
            where.append(f"{column} = ?")
            params.append(value)
        if since_ms is not None:
            where.append("created_at >= ?")
            params.append(since_ms)
        if until_ms is not None:
            where.append("created_at < ?")
            params.append(until_ms)
        if isinstance(cursor, tuple):
            where.append("(created_at, id) < (?, ?)")
            params += list(cursor)
        elif cursor is not None:
            where.append("id < ?")
            params.append(cursor)
        order = "created_at DESC, id DESC" if by_time else "id DESC"
        sql = f"SELECT {_COLUMNS_SQL} FROM click WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        return self.conn.execute(sql, [*params, limit]).fetchall()

    def sorted_log(
        self,
        equal: dict[str, Any],
        *,
        campaign_ids: list[int] | None,
        before_ms: int | None,
        since_ms: int | None,
        until_ms: int | None,
        keys: list[tuple[str, bool, dict[int, int] | None]],
        after: list[Any] | None,
        limit: int,
        up_to: int | None = None,
        leave_out: list[int] | None = None,
        columns: tuple[str, ...] = HISTORY_COLUMNS,
    ) -> list[tuple]:
        """The clicks created before `before_ms` (None: any) with these column values, in the sorted click
        log's order (models/reporting/logorder.py: `keys` as (column, descending, an id column's name
        places), then id newest first, NULLs last), after the row whose key values are `after`; `limit` of
        them, each as its values of `columns` (the id first). With `up_to`, only ids up to it, less those in
        `leave_out` (the part the row store trusts the history with). A column the history does not keep
        (the IP address) is the empty text, as the log shows it."""
        assert columns[0] == "id" and set(columns) <= set(COLUMN_TYPES), columns  # Only ours, in SQL.
        where: list[str] = []
        params: list[Any] = []
        if before_ms is not None:
            where.append("created_at < ?")
            params.append(before_ms)
        if up_to is not None:
            where.append("id <= ?")
            params.append(up_to)
        if leave_out:
            where.append("id NOT IN (SELECT unnest(CAST(? AS BIGINT[])))")
            params.append(list(leave_out))
        for column, value in equal.items():
            assert column in COLUMN_TYPES, column  # A column name cannot be a parameter: only ours.
            where.append(f"{column} = ?")
            params.append(value)
        if campaign_ids is not None:
            where.append("campaign_id IN (SELECT unnest(?))")
            params.append(list(campaign_ids))
        if since_ms is not None:
            where.append("created_at >= ?")
            params.append(since_ms)
        if until_ms is not None:
            where.append("created_at < ?")
            params.append(until_ms)
        exprs: list[tuple[str, list[Any], bool]] = []
        for column, is_descending, ranks in [*keys, ("id", True, None)]:
            assert column in COLUMN_TYPES or column == "ip", column
            if column == "ip":
                exprs.append(("''", [], is_descending))
            elif ranks is None:
                exprs.append((column, [], is_descending))
            else:  # No names at all (no offers yet): one WHEN no id matches, as a CASE needs one.
                pairs = sorted(ranks.items()) or [(0, 0)]
                whens = " ".join("WHEN ? THEN ?" for _ in pairs)
                exprs.append((f"(CASE {column} {whens} END)", [v for p in pairs for v in p], is_descending))
        if after is not None:
            ways, way_params = [], []
            for index, value in enumerate(after):
                if value is None:  # Nothing sorts after a NULL on its key but other NULLs.
                    continue
                parts, part_params = [], []
                for (expr, expr_params, _), earlier in zip(exprs[:index], after[:index], strict=True):
                    parts.append(f"{expr} IS NULL" if earlier is None else f"{expr} = ?")
                    part_params += expr_params if earlier is None else [*expr_params, earlier]
                expr, expr_params, is_descending = exprs[index]
                parts.append(f"({expr} {'<' if is_descending else '>'} ? OR {expr} IS NULL)")
                part_params += [*expr_params, value, *expr_params]
                ways.append("(" + " AND ".join(parts) + ")")
                way_params += part_params
            where.append("(" + " OR ".join(ways) + ")")
            params += way_params
        order = ", ".join(f"{expr} {'DESC' if desc else 'ASC'} NULLS LAST" for expr, _, desc in exprs)
        order_params = [v for _, expr_params, _ in exprs for v in expr_params]
        # PERF: the sort carries the id alone, then the page's rows are read by id: a top-N sort carrying
        # every column (thirty sub ids) read them all for every row, ~3-5x slower over a million clicks.
        sql = f"SELECT id FROM click WHERE {' AND '.join(where) or 'true'} ORDER BY {order} LIMIT ?"
        ids = [row[0] for row in self.conn.execute(sql, [*params, *order_params, limit]).fetchall()]
        if not ids:
            return []
        # PERF: only the columns asked for: a CSV chunk's 10,000 rows of every column cost ~0.3 s more.
        rows = self.conn.execute(
            f"SELECT {', '.join(columns)} FROM click WHERE id BETWEEN ? AND ? "
            "AND id IN (SELECT unnest(CAST(? AS BIGINT[])))",
            (min(ids), max(ids), ids),
        ).fetchall()
        by_id = {row[0]: row for row in rows}
        return [by_id[click_id] for click_id in ids]

    def hours(self, up_to: int, leave_out: list[int]) -> list[tuple[int, int, float]]:
        """(hour, clicks, cost) of the clicks up to an id, but those in `leave_out`."""
        return self.conn.execute(self.SQL_HOURS, (up_to, list(leave_out))).fetchall()
