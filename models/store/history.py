"""The row store's side of the columnar click history (docs/analytics.md): its state row, the queue of
clicks mutated after they were copied, the closed watermark, and the click rows as the history copies
them. The DuckDB side is models/store/duckdb/.

- `history_state` (migration 0021): `position`, the highest click id the history holds that readers may
  trust (moved only after DuckDB has committed: DuckDB may be ahead of it, never behind); `target`, the
  appender's closed watermark, set before it reads a row.
- A click mutation (LP click, cost spread, sub_id set) calls `record_changes` in its own transaction:
  a click with an id up to `target` is queued in `history_change`, its `seq` moved on if it already was,
  so the appender's `forget` of the (click_id, seq) pair it copied leaves a newer mutation queued.
- The watermark is closed: no click with an id at or below it can still be uncommitted. SQLite has one
  writer at a time, so its max(id) read inside a write transaction is closed. On PostgreSQL ids are
  handed out before commit by concurrent transactions, so every click inserter and every mutation takes
  `pg_advisory_xact_lock_shared(HISTORY_LOCK)` in its transaction (`guard`), and the appender reads
  max(id) and sets `target` holding the exclusive one: every transaction that took an id or read `target`
  before has committed by then, and every later one gets a higher id and sees the new target.
- Conversions (migration 0035) go the same way beside the clicks: `conversion_position` and
  `conversion_target` in `history_state`, set with the clicks' in the same steps (one watermark
  transaction closes both), and `history_conversion_change` queues a conversion changed after it was
  copied (`record_conversion_changes`, or `record_currency_changes` for a relabelled currency). A
  conversion inserter takes the same shared advisory lock on PostgreSQL before it takes its id.
"""

from __future__ import annotations

from abc import abstractmethod

from peewee import SQL

from models.store.rows import Store, fetch_single
from models.tables.click import ROUTING_COLUMNS, SUB_ID_COLUMNS

# The advisory lock of the history's watermark on PostgreSQL ("LANH").
HISTORY_LOCK = 0x4C414E48
# A click as the history copies it, from the row store (`referrer` becomes referrer_domain in
# models/reporting/history.py; ip and user agent are never copied: no report reads them).
ROW_COLUMNS: tuple[str, ...] = (
    "id",
    "created_at",
    "campaign_id",
    "stream_id",
    "offer_id",
    "lander_id",
    "lp_clicked_at",
    "domain",
    "referrer",
    "source",
    "cost",
    "is_unique_global",
    "is_unique_campaign",
    "is_unique_stream",
    "is_bot",
    "visitor_key",
    *SUB_ID_COLUMNS,
    *ROUTING_COLUMNS,
    "subid",  # What a postback, `lanner click show` and the click log find a pruned click by.
)
_SELECT_ROWS = f"SELECT {', '.join(ROW_COLUMNS)} FROM click"
# A conversion as the history copies it: what a report sums and groups it by (its click's other
# dimensions are the history's copy of the click's), and what `verify` compares.
CONVERSION_COLUMNS: tuple[str, ...] = (
    "id",
    "click_id",
    "click_created_at",
    "created_at",
    "campaign_id",
    "stream_id",
    "offer_id",
    "status",
    "payout",
    "currency",
    "report_payout",
    "cost",
)
_SELECT_CONVERSIONS = f"SELECT {', '.join(CONVERSION_COLUMNS)} FROM conversion"
HOUR_MS = 3_600_000


class HistoryStore(Store):
    """The history's bookkeeping in the row store of one connection; writes join the caller's transaction."""

    SQL_STATE = "SELECT position, target FROM history_state WHERE id = 1"
    SQL_SET_POSITION = "UPDATE history_state SET position = ? WHERE id = 1"
    SQL_SET_TARGET = "UPDATE history_state SET target = ? WHERE id = 1"
    SQL_MAX_ID = "SELECT COALESCE(MAX(id), 0) FROM click"
    SQL_CONVERSION_STATE = "SELECT conversion_position, conversion_target FROM history_state WHERE id = 1"
    SQL_SET_CONVERSION_POSITION = "UPDATE history_state SET conversion_position = ? WHERE id = 1"
    SQL_SET_CONVERSION_TARGET = "UPDATE history_state SET conversion_target = ? WHERE id = 1"
    SQL_MAX_CONVERSION_ID = "SELECT COALESCE(MAX(id), 0) FROM conversion"
    SQL_RECORD_CONVERSION_CHANGE = (
        "INSERT INTO history_conversion_change (conversion_id, seq) "
        "SELECT CAST(? AS BIGINT), 1 FROM history_state "
        "WHERE id = 1 AND CAST(? AS BIGINT) <= conversion_target "
        "ON CONFLICT (conversion_id) DO UPDATE SET seq = history_conversion_change.seq + 1"
    )
    # Every copied conversion of a currency (a relabel changes them all; rare).
    SQL_RECORD_CURRENCY_CHANGES = (
        "INSERT INTO history_conversion_change (conversion_id, seq) "
        "SELECT cv.id, 1 FROM conversion AS cv WHERE cv.currency = ? "
        "AND cv.id <= (SELECT conversion_target FROM history_state WHERE id = 1) "
        "ON CONFLICT (conversion_id) DO UPDATE SET seq = history_conversion_change.seq + 1"
    )
    SQL_CONVERSION_CHANGES = (
        "SELECT conversion_id, seq FROM history_conversion_change "
        "WHERE conversion_id > ? AND conversion_id <= ? ORDER BY conversion_id LIMIT ?"
    )
    SQL_FORGET_CONVERSION = "DELETE FROM history_conversion_change WHERE conversion_id = ? AND seq = ?"
    SQL_PENDING_CONVERSIONS = "SELECT COUNT(*) FROM history_conversion_change"
    SQL_CONVERSION_ROWS = _SELECT_CONVERSIONS + " WHERE id > ? AND id <= ? ORDER BY id LIMIT ?"
    # Per hour of their click's time and currency: conversions, payout and report payout, of those up
    # to an id but the queued ones.
    SQL_CONVERSION_HOURS = (
        f"SELECT click_created_at - click_created_at % {HOUR_MS}, currency, COUNT(*), "
        "COALESCE(SUM(payout), 0), COALESCE(SUM(report_payout), 0) FROM conversion "
        "WHERE id <= ? AND id NOT IN (SELECT conversion_id FROM history_conversion_change) "
        f"GROUP BY click_created_at - click_created_at % {HOUR_MS}, currency"
    )
    SQL_CONVERSION_HOUR_ROWS = (
        _SELECT_CONVERSIONS + " WHERE click_created_at >= ? AND click_created_at < ? AND id <= ?"
    )
    SQL_HELD_BETWEEN = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"
    SQL_MIN_CREATED = "SELECT MIN(created_at), MAX(created_at) FROM click WHERE id <= ?"
    # A click up to the target is queued; one already queued gets a new seq (a newer mutation).
    SQL_RECORD_CHANGE = (
        "INSERT INTO history_change (click_id, seq) "
        "SELECT CAST(? AS BIGINT), 1 FROM history_state WHERE id = 1 AND CAST(? AS BIGINT) <= target "
        "ON CONFLICT (click_id) DO UPDATE SET seq = history_change.seq + 1"
    )
    SQL_CHANGES = (
        "SELECT click_id, seq FROM history_change WHERE click_id > ? AND click_id <= ? "
        "ORDER BY click_id LIMIT ?"
    )
    SQL_FORGET = "DELETE FROM history_change WHERE click_id = ? AND seq = ?"
    SQL_PENDING = "SELECT COUNT(*) FROM history_change"
    SQL_ROWS = _SELECT_ROWS + " WHERE id > ? AND id <= ? ORDER BY id LIMIT ?"
    # Per hour (Unix ms of its start): clicks and their cost, of the clicks up to an id but the queued ones.
    SQL_HOURS = (
        f"SELECT created_at - created_at % {HOUR_MS}, COUNT(*), COALESCE(SUM(cost), 0) FROM click "
        "WHERE id <= ? AND id NOT IN (SELECT click_id FROM history_change) "
        f"GROUP BY created_at - created_at % {HOUR_MS}"
    )
    SQL_HOUR_ROWS = _SELECT_ROWS + " WHERE created_at >= ? AND created_at < ? AND id <= ?"

    __slots__ = ()

    def state(self) -> tuple[int, int]:
        """(position, target)."""
        return tuple(fetch_single(self.conn, self.SQL_STATE))

    def set_position(self, position: int) -> None:
        self.conn.execute(self.SQL_SET_POSITION, (position,)).close()

    def close_watermark(self) -> int:
        """The highest click id no uncommitted click can be below, set as the target; in a write
        transaction (a short one: on PostgreSQL it holds back every click inserter meanwhile)."""
        self.lock_watermark()
        watermark = fetch_single(self.conn, self.SQL_MAX_ID)[0]
        self.conn.execute(self.SQL_SET_TARGET, (watermark,)).close()
        # The conversions' under the same lock: no conversion id at or below it is uncommitted either.
        conversions = fetch_single(self.conn, self.SQL_MAX_CONVERSION_ID)[0]
        self.conn.execute(self.SQL_SET_CONVERSION_TARGET, (conversions,)).close()
        return watermark

    def conversion_state(self) -> tuple[int, int]:
        """(conversion_position, conversion_target)."""
        return tuple(fetch_single(self.conn, self.SQL_CONVERSION_STATE))

    def set_conversion_position(self, position: int) -> None:
        self.conn.execute(self.SQL_SET_CONVERSION_POSITION, (position,)).close()

    def answered(self) -> tuple[tuple[int, list[int]], tuple[int, list[int]]]:
        """What the columnar history answers for, as a reader takes it in one snapshot: (the click
        position, the clicks up to it queued for a copy again), and the same of the conversions."""
        position, _ = self.state()
        queued = [click_id for click_id, _ in self.changes(0, position, 2**62)]
        conversion_position, _ = self.conversion_state()
        queued_conversions = [
            conversion_id for conversion_id, _ in self.conversion_changes(0, conversion_position, 2**62)
        ]
        return (position, queued), (conversion_position, queued_conversions)

    def max_conversion_id(self) -> int:
        return fetch_single(self.conn, self.SQL_MAX_CONVERSION_ID)[0]

    def record_conversion_changes(self, conversion_ids: list[int]) -> None:
        """Queue these changed conversions for the history (those it holds or is copying); in the
        change's transaction."""
        if not conversion_ids:
            return
        self.guard()
        pairs = [(i, i) for i in sorted(conversion_ids)]  # In id order: two writers lock rows in one order.
        self.conn.executemany(self.SQL_RECORD_CONVERSION_CHANGE, pairs).close()

    def record_currency_changes(self, currency: str) -> None:
        """Queue every copied conversion received in `currency` (its label just changed to it)."""
        self.guard()
        self.conn.execute(self.SQL_RECORD_CURRENCY_CHANGES, (currency,)).close()

    def conversion_changes(self, after: int, up_to: int, limit: int) -> list[tuple[int, int]]:
        """(conversion_id, seq) of queued conversions with after < conversion_id <= up_to, lowest first."""
        return self.conn.execute(self.SQL_CONVERSION_CHANGES, (after, up_to, limit)).fetchall()

    def forget_conversions(self, pairs: list[tuple[int, int]]) -> None:
        """Unqueue exactly these (conversion_id, seq)."""
        self.conn.executemany(self.SQL_FORGET_CONVERSION, pairs).close()

    def pending_conversions(self) -> int:
        return fetch_single(self.conn, self.SQL_PENDING_CONVERSIONS)[0]

    def conversion_rows_after(self, after: int, up_to: int, limit: int) -> list[tuple]:
        """CONVERSION_COLUMNS of the conversions with after < id <= up_to, lowest id first."""
        return self.conn.execute(self.SQL_CONVERSION_ROWS, (after, up_to, limit)).fetchall()

    def conversion_hours(self, up_to: int) -> list[tuple[int, str, int, float, float]]:
        """(hour of the click, currency, conversions, payout, report payout) of the conversions up to an
        id, but those queued in history_conversion_change."""
        return self.conn.execute(self.SQL_CONVERSION_HOURS, (up_to,)).fetchall()

    def conversion_hour_rows(self, hour: int, up_to: int) -> list[tuple]:
        """CONVERSION_COLUMNS of the conversions up to an id whose click is of this hour."""
        return self.conn.execute(self.SQL_CONVERSION_HOUR_ROWS, (hour, hour + HOUR_MS, up_to)).fetchall()

    def max_id(self) -> int:
        return fetch_single(self.conn, self.SQL_MAX_ID)[0]

    def held_between(self, after: int, up_to: int) -> int:
        """How many clicks with after < id <= up_to the row store holds (the others were pruned, or on
        PostgreSQL are ids a sequence never handed out)."""
        return fetch_single(self.conn, self.SQL_HELD_BETWEEN, (after, up_to))[0]

    def period(self, up_to: int) -> tuple[int | None, int | None]:
        """(first, last created_at) of the clicks up to an id."""
        return tuple(fetch_single(self.conn, self.SQL_MIN_CREATED, (up_to,)))

    def record_changes(self, click_ids: list[int]) -> None:
        """Queue these mutated clicks for the history (those it holds or is copying); in the mutation's
        transaction. PERF: a statement per click, cheap when the click is past the target (no row)."""
        if not click_ids:
            return
        self.guard()
        # In click id order: two flushers queueing the same clicks lock their rows in one order.
        self.conn.executemany(self.SQL_RECORD_CHANGE, [(i, i) for i in sorted(click_ids)]).close()

    def changes(self, after: int, up_to: int, limit: int) -> list[tuple[int, int]]:
        """(click_id, seq) of queued clicks with after < click_id <= up_to, lowest first."""
        return self.conn.execute(self.SQL_CHANGES, (after, up_to, limit)).fetchall()

    def forget(self, pairs: list[tuple[int, int]]) -> None:
        """Unqueue exactly these (click_id, seq): a click mutated again since keeps its newer seq."""
        self.conn.executemany(self.SQL_FORGET, pairs).close()

    def pending(self) -> int:
        return fetch_single(self.conn, self.SQL_PENDING)[0]

    def rows_after(self, after: int, up_to: int, limit: int) -> list[tuple]:
        """ROW_COLUMNS of the clicks with after < id <= up_to, lowest id first, at most `limit`."""
        return self.conn.execute(self.SQL_ROWS, (after, up_to, limit)).fetchall()

    def hours(self, up_to: int) -> list[tuple[int, int, float]]:
        """(hour, clicks, cost) of the clicks up to an id, but those queued in history_change."""
        return self.conn.execute(self.SQL_HOURS, (up_to,)).fetchall()

    def hour_rows(self, hour: int, up_to: int) -> list[tuple]:
        """ROW_COLUMNS of an hour's clicks up to an id."""
        return self.conn.execute(self.SQL_HOUR_ROWS, (hour, hour + HOUR_MS, up_to)).fetchall()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).

    @abstractmethod
    def rows_of(self, click_ids: list[int]) -> list[tuple]:
        """ROW_COLUMNS of these clicks (those still in the row store)."""

    @abstractmethod
    def conversion_rows_of(self, conversion_ids: list[int]) -> list[tuple]:
        """CONVERSION_COLUMNS of these conversions (those still in the row store)."""

    @abstractmethod
    def lock_watermark(self) -> None:
        """Wait for every transaction that holds an uncommitted click id or read the target."""

    @abstractmethod
    def guard(self) -> None:
        """In a click inserter's or mutation's transaction, before it takes an id or reads the target."""


def queued_clicks() -> SQL:
    """The ids queued in history_change as a subquery a row-store select tests a click id against
    (`Click.id.in_(queued_clicks())`): the queue may hold more ids than a statement takes parameters."""
    return SQL("(SELECT click_id FROM history_change)")
