"""Deleting old rows in chunks: raw clicks (`lanner prune`, and LANNER_RAW_RETENTION's deletion of the
clicks the columnar history holds), the postback log and refusal counters.

How old, how many per chunk and the pauses between chunks are models/ops/retention.py's and
models/reporting/rawretention.py's; each call here is one chunk, run in the caller's transaction so
the spool flusher gets the lock in between.

A held click (LANNER_RAW_RETENTION) is one the history may answer for: its id at or below
history_state.position and not queued in history_change (a queued click's copy is stale). The delete
states both conditions again in its own statement. On PostgreSQL it first locks the rows, skipping any
a mutation (an LP click, a cost spread, a postback's sub_id) holds, and the DELETE, a later statement
under READ COMMITTED, sees every queue row committed before: a click mutated while its batch is
deleted is either skipped or waits and finds no row; the deleter never waits for a mutation, so the
two cannot deadlock, and click inserts are never held back.
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.rows import Store, fetch_single


class RetentionStore(Store):
    SQL_CAMPAIGN_WINDOWS = "SELECT id, uniqueness_hours FROM campaign"
    SQL_DELETE_REFUSALS = "DELETE FROM postback_refusal WHERE day < ?"
    SQL_OLDEST_CLICK = "SELECT MIN(created_at) FROM click WHERE campaign_id = ?"
    # The oldest click the history does not hold yet (a primary key range: the appender's lag).
    SQL_OLDEST_UNHELD = "SELECT MIN(created_at) FROM click WHERE id > ?"
    SQL_COUNT_UP_TO = "SELECT COUNT(*) FROM click WHERE id <= ?"
    # Clicks created before a cutoff that the history does not hold yet (past its position: a primary
    # key range, the appender's lag, filtered by time).
    SQL_COUNT_UNHELD_BEFORE = (
        "SELECT COUNT(*) FROM click WHERE id > (SELECT position FROM history_state WHERE id = 1) "
        "AND created_at < ?"
    )
    # A click queued for a fresh copy (mutated since the history copied it) is never pruned: the history
    # skips its stale copy and reads it from the row store, so deleted now it would count nowhere; once
    # the next append copies it again, the next prune takes it.
    _NOT_QUEUED = "id NOT IN (SELECT click_id FROM history_change)"
    SQL_COUNT_QUEUED_BEFORE = (
        "SELECT COUNT(*) FROM click WHERE id IN (SELECT click_id FROM history_change) AND created_at < ?"
    )
    # Held by the history and not converted (a conversion's status changes read its click's rollup key);
    # never the newest click: SQLite gives a new click max(id) + 1, and an id the history already holds
    # would never be copied.
    _HELD = (
        "id <= (SELECT position FROM history_state WHERE id = 1) "
        "AND id NOT IN (SELECT click_id FROM history_change) "
        "AND NOT EXISTS (SELECT 1 FROM conversion AS cv WHERE cv.subid = click.subid) "
        # A cost waiting for a rate is written to its click (and copied again) when the rate comes.
        "AND NOT EXISTS (SELECT 1 FROM unrated_cost AS u WHERE u.click_id = click.id) "
        "AND id < (SELECT MAX(id) FROM click)"
    )

    __slots__ = ()

    def campaign_windows(self) -> list[tuple[int, float]]:
        """(campaign id, its uniqueness window in hours) of every campaign."""
        return self.conn.execute(self.SQL_CAMPAIGN_WINDOWS).fetchall()

    def count_unheld_before(self, cutoff_ms: int) -> int:
        return fetch_single(self.conn, self.SQL_COUNT_UNHELD_BEFORE, (cutoff_ms,))[0]

    def count_queued_before(self, cutoff_ms: int) -> int:
        """Clicks created before a cutoff that wait for a fresh copy in the history: a prune keeps them."""
        return fetch_single(self.conn, self.SQL_COUNT_QUEUED_BEFORE, (cutoff_ms,))[0]

    def count_clicks_before(self, campaign_id: int, cutoff_ms: int) -> int:
        return fetch_single(self.conn, self.SQL_COUNT_OLDER, (campaign_id, cutoff_ms))[0]

    def delete_clicks_before(self, campaign_id: int, cutoff_ms: int, chunk: int) -> int:
        """Delete up to `chunk` of the campaign's clicks created before `cutoff_ms`, never one queued for
        a fresh copy in the history; how many went."""
        return self.conn.execute(self.SQL_DELETE_CLICKS, (campaign_id, cutoff_ms, chunk)).rowcount

    def delete_postback_log_before(self, cutoff_ms: int, chunk: int) -> int:
        return self.conn.execute(self.SQL_DELETE_POSTBACK_LOG, (cutoff_ms, chunk)).rowcount

    def delete_refusals_before(self, day: int) -> int:
        """Refusal counters of UTC days (YYYYMMDD) before `day`."""
        return self.conn.execute(self.SQL_DELETE_REFUSALS, (day,)).rowcount

    def oldest_click(self, campaign_ids: list[int]) -> int | None:
        """created_at of the oldest raw click of these campaigns (one index probe each), None if none."""
        found = [fetch_single(self.conn, self.SQL_OLDEST_CLICK, (i,))[0] for i in campaign_ids]
        return min((at for at in found if at is not None), default=None)

    def oldest_unheld(self, position: int) -> int | None:
        """created_at of the oldest click past the history's position (None: it holds every click)."""
        return fetch_single(self.conn, self.SQL_OLDEST_UNHELD, (position,))[0]

    def count_up_to(self, position: int) -> int:
        return fetch_single(self.conn, self.SQL_COUNT_UP_TO, (position,))[0]

    def held_before(self, campaign_id: int, cutoff_ms: int, limit: int) -> list[int]:
        """Ids of up to `limit` of the campaign's clicks created before the cutoff that the history
        holds, oldest first."""
        return [row[0] for row in self.conn.execute(self.SQL_HELD_BEFORE, (campaign_id, cutoff_ms, limit))]

    def delete_held(self, click_ids: list[int]) -> int:
        """Delete these clicks, but any the history does not hold now (or, on PostgreSQL, a mutation
        holds); how many went. In a write transaction."""
        return self._delete_held(click_ids) if click_ids else 0

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_HELD_BEFORE: str

    @abstractmethod
    def _delete_held(self, click_ids: list[int]) -> int: ...

    SQL_COUNT_OLDER: str
    SQL_DELETE_CLICKS: str
    SQL_DELETE_POSTBACK_LOG: str
