"""Deleting old rows in chunks: raw clicks (`lanner prune`), the postback log and refusal counters.

How old, how many per chunk and the pauses between chunks are models/ops/retention.py's; each call
here is one chunk, run in the caller's transaction so the spool flusher gets the lock in between.
"""

from __future__ import annotations

from models.store.rows import Store, fetch_single


class RetentionStore(Store):
    SQL_CAMPAIGN_WINDOWS = "SELECT id, uniqueness_hours FROM campaign"
    SQL_DELETE_REFUSALS = "DELETE FROM postback_refusal WHERE day < ?"

    __slots__ = ()

    def campaign_windows(self) -> list[tuple[int, float]]:
        """(campaign id, its uniqueness window in hours) of every campaign."""
        return self.conn.execute(self.SQL_CAMPAIGN_WINDOWS).fetchall()

    def count_clicks_before(self, campaign_id: int, cutoff_ms: int) -> int:
        return fetch_single(self.conn, self.SQL_COUNT_OLDER, (campaign_id, cutoff_ms))[0]

    def delete_clicks_before(self, campaign_id: int, cutoff_ms: int, chunk: int) -> int:
        """Delete up to `chunk` of the campaign's clicks created before `cutoff_ms`; how many went."""
        return self.conn.execute(self.SQL_DELETE_CLICKS, (campaign_id, cutoff_ms, chunk)).rowcount

    def delete_postback_log_before(self, cutoff_ms: int, chunk: int) -> int:
        return self.conn.execute(self.SQL_DELETE_POSTBACK_LOG, (cutoff_ms, chunk)).rowcount

    def delete_refusals_before(self, day: int) -> int:
        """Refusal counters of UTC days (YYYYMMDD) before `day`."""
        return self.conn.execute(self.SQL_DELETE_REFUSALS, (day,)).rowcount

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_COUNT_OLDER: str
    SQL_DELETE_CLICKS: str
    SQL_DELETE_POSTBACK_LOG: str
