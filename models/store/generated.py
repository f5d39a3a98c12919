"""The bench generator's writes (`lanner generate clicks`, the rehearsals): fixture campaigns and
historic clicks in bulk, in the caller's transaction.

What the rows hold (a realistic mix, exact uniqueness flags) is workers/bench/generate.py's.
"""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager

from models.store.rows import Store, fetch_single

GENERATED_ALIASES = "gen-%"  # The aliases of the generated campaigns, as a LIKE pattern.


class GeneratedStore(Store):
    # Fixture campaigns in the columns every schema from 0004 on has (the rehearsals fill a database
    # migrated only up to an older release, where the services' models name columns it lacks yet).
    SQL_INSERT_OFFER = (
        "INSERT INTO offer (name, url, currency, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
    )
    SQL_INSERT_CAMPAIGN = (
        "INSERT INTO campaign (alias, name, cost_currency, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
    )
    SQL_INSERT_STREAM = (
        "INSERT INTO stream (campaign_id, name, type, position, created_at, updated_at) "
        "VALUES (?, 'Default', 'regular', 1, ?, ?)"
    )
    SQL_INSERT_STREAM_OFFER = "INSERT INTO stream_offer (stream_id, offer_id, weight) VALUES (?, ?, 100)"
    SQL_GENERATED_CAMPAIGNS = "SELECT COUNT(*) FROM campaign WHERE alias LIKE ?"
    SQL_GENERATED_TARGETS = (
        "SELECT c.id, s.id, so.offer_id FROM campaign c JOIN stream s ON s.campaign_id = c.id "
        "JOIN stream_offer so ON so.stream_id = s.id WHERE c.alias LIKE ? ORDER BY c.id, s.id, so.offer_id"
    )
    SQL_UNIQUENESS_HOURS = "SELECT id, uniqueness_hours FROM campaign"

    __slots__ = ()

    def insert_campaign(
        self, name: str, alias: str, offer_name: str, offer_url: str, currency: str, now_ms: int
    ) -> int:
        """A campaign with one stream to a new offer; its id."""
        offer_id = self._inserted(self.SQL_INSERT_OFFER, (offer_name, offer_url, currency, now_ms, now_ms))
        campaign_id = self._inserted(self.SQL_INSERT_CAMPAIGN, (alias, name, currency, now_ms, now_ms))
        stream_id = self._inserted(self.SQL_INSERT_STREAM, (campaign_id, now_ms, now_ms))
        self.conn.execute(self.SQL_INSERT_STREAM_OFFER, (stream_id, offer_id)).close()
        return campaign_id

    def generated_campaigns(self) -> int:
        return fetch_single(self.conn, self.SQL_GENERATED_CAMPAIGNS, (GENERATED_ALIASES,))[0]

    def generated_targets(self) -> list[tuple[int, int, int]]:
        """(campaign id, stream id, offer id) of every generated campaign's streams."""
        return self.conn.execute(self.SQL_GENERATED_TARGETS, (GENERATED_ALIASES,)).fetchall()

    def uniqueness_hours(self) -> dict[int, float]:
        return dict(self.conn.execute(self.SQL_UNIQUENESS_HOURS).fetchall())

    def has_visitor_key(self) -> bool:
        """Whether the click table has migration 0005's visitor_key (a rehearsal's may not yet)."""
        return "visitor_key" in {row[1] for row in self.conn.execute(self.SQL_CLICK_COLUMNS).fetchall()}

    def optimize(self) -> None:
        """Fresh planner statistics after a bulk insert."""
        self.conn.execute(self.SQL_OPTIMIZE).close()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_CLICK_COLUMNS: str
    SQL_OPTIMIZE: str

    @abstractmethod
    def _inserted(self, sql: str, params: tuple) -> int: ...

    @abstractmethod
    def insert_clicks(self, rows: list[tuple], with_visitor_key: bool) -> None:
        """Rows of CLICK_COLUMNS; the visitor key computed from their ip and ua_hash when the table has it."""

    @abstractmethod
    def bulk(self) -> AbstractContextManager[None]:
        """Around a bulk insert: a big page cache keeps the index pages in memory."""
