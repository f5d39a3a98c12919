"""Outbound postback deliveries (`postback_delivery`): queued, claimed, sent or given up.

The rules (what to send, when to retry, when to give up) are models/conversions/outbound.py's; the
statements are here. A delivery is queued in the transaction of the conversion change that calls
for it; a sender claims it (moves its next attempt past the request's timeout) before sending, so
two senders never send one delivery at once.
"""

from __future__ import annotations

import json
from abc import abstractmethod

from models.store.rows import Store, fetch_one, fetch_single


class DeliveryStore(Store):
    """The deliveries of one connection; writes join the caller's transaction."""

    SQL_TARGETS = "SELECT id, statuses FROM postback_target WHERE campaign_id = ? AND status = 'active'"
    # One delivery per (conversion, target, status): a repeated change queues nothing new.
    SQL_QUEUE = """
INSERT INTO postback_delivery (conversion_id, target_id, status, next_attempt_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
    # An ad platform connection's events ride the same queue: one per (conversion, connection, status).
    SQL_CONNECTIONS = """
SELECT id, events FROM platform_connection
WHERE status = 'active' AND (campaign_id = ? OR source_id = (SELECT source_id FROM campaign WHERE id = ?))
"""
    SQL_QUEUE_EVENT = """
INSERT INTO postback_delivery (conversion_id, connection_id, status, next_attempt_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
    SQL_CLAIM = """
UPDATE postback_delivery SET next_attempt_at = ?, attempts = attempts + 1, updated_at = ?
WHERE id = ? AND state = 'pending' AND next_attempt_at <= ?
"""
    SQL_STATE = "SELECT state FROM postback_delivery WHERE id = ?"
    SQL_CONNECTION_OF = "SELECT connection_id, state FROM postback_delivery WHERE id = ?"
    SQL_DELIVERY = """
SELECT d.status, d.attempts, t.status, t.url, t.method, cv.id, cv.tid, cv.payout, cv.currency, cv.click_id,
    c.name
FROM postback_delivery AS d
JOIN postback_target AS t ON t.id = d.target_id
JOIN conversion AS cv ON cv.id = d.conversion_id
JOIN campaign AS c ON c.id = cv.campaign_id
WHERE d.id = ?
"""
    SQL_SENT = """
UPDATE postback_delivery SET state = 'sent', url = ?, response_code = ?, error = '', updated_at = ?
WHERE id = ?
"""
    SQL_NOT_SENT = """
UPDATE postback_delivery SET state = ?, url = ?, response_code = ?, error = ?, next_attempt_at = ?,
    updated_at = ?
WHERE id = ?
"""
    SQL_PENDING = "SELECT COUNT(*) FROM postback_delivery WHERE state = 'pending'"
    SQL_CONNECTION = """
SELECT id, name, platform, campaign_id, source_id, credentials, events, test_event_code, status
FROM platform_connection WHERE id = ?
"""
    SQL_CONNECTION_DUE = """
SELECT id FROM postback_delivery
WHERE connection_id = ? AND state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?
"""
    SQL_EVENT = """
SELECT d.id, d.status, d.attempts, d.created_at, cv.id, cv.payout, cv.currency, cv.click_id, cv.campaign_id
FROM postback_delivery AS d
JOIN conversion AS cv ON cv.id = d.conversion_id
WHERE d.id = ?
"""
    SQL_SOURCE_PARAMETERS = """
SELECT s.parameters FROM campaign AS c JOIN traffic_source AS s ON s.id = c.source_id WHERE c.id = ?
"""
    # A claimed event put back untried (its connection is paused): the claim's attempt is not counted.
    SQL_RELEASE = """
UPDATE postback_delivery SET attempts = attempts - 1, next_attempt_at = ?, updated_at = ? WHERE id = ?
"""
    SQL_RESUME = """
UPDATE postback_delivery SET next_attempt_at = ?, updated_at = ?
WHERE connection_id = ? AND state = 'pending'
"""

    __slots__ = ()

    def queue(self, campaign_id: int, conversion_id: int, status: str, now_ms: int) -> list[int]:
        """A delivery to every active target of the campaign that wants `status`; the new ids."""
        ids = []
        for target_id, statuses in self.conn.execute(self.SQL_TARGETS, (campaign_id,)).fetchall():
            if status in statuses.split(","):
                delivery_id = self._queued_id(
                    self.SQL_QUEUE, (conversion_id, target_id, status, now_ms, now_ms, now_ms)
                )
                if delivery_id is not None:
                    ids.append(delivery_id)
        for connection_id, events in self.conn.execute(
            self.SQL_CONNECTIONS, (campaign_id, campaign_id)
        ).fetchall():
            if status in json.loads(events):
                delivery_id = self._queued_id(
                    self.SQL_QUEUE_EVENT, (conversion_id, connection_id, status, now_ms, now_ms, now_ms)
                )
                if delivery_id is not None:
                    ids.append(delivery_id)
        return ids

    def claim(self, delivery_id: int, now_ms: int, until_ms: int) -> bool:
        """Take a pending, due delivery for one attempt (until `until_ms`); False if it is not."""
        return bool(self.conn.execute(self.SQL_CLAIM, (until_ms, now_ms, delivery_id, now_ms)).rowcount)

    def connection_of(self, delivery_id: int) -> tuple[int | None, str | None]:
        """(The platform connection a delivery is an event of, None for a postback target's; its state),
        (None, None) for no delivery."""
        row = fetch_one(self.conn, self.SQL_CONNECTION_OF, (delivery_id,))
        return (row[0], row[1]) if row else (None, None)

    def connection(self, connection_id: int) -> tuple | None:
        """(id, name, platform, campaign id, source id, credentials JSON, events JSON, test event code,
        status)."""
        return fetch_one(self.conn, self.SQL_CONNECTION, (connection_id,))

    def connection_due(self, connection_id: int, now_ms: int, limit: int) -> list[int]:
        """The connection's pending events whose attempt is due, oldest first."""
        rows = self.conn.execute(self.SQL_CONNECTION_DUE, (connection_id, now_ms, limit)).fetchall()
        return [row[0] for row in rows]

    def event(self, delivery_id: int) -> tuple | None:
        """(delivery id, status, attempts, queued at, conversion id, payout, currency, click id,
        campaign id)."""
        return fetch_one(self.conn, self.SQL_EVENT, (delivery_id,))

    def source_parameters(self, campaign_id: int) -> str:
        """The JSON parameters of the campaign's traffic source; '[]' with none."""
        row = fetch_one(self.conn, self.SQL_SOURCE_PARAMETERS, (campaign_id,))
        return row[0] if row else "[]"

    def release(self, delivery_id: int, next_attempt_ms: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_RELEASE, (next_attempt_ms, now_ms, delivery_id)).close()

    def resume(self, connection_id: int, now_ms: int) -> int:
        """Make a connection's held events due now; how many."""
        return self.conn.execute(self.SQL_RESUME, (now_ms, now_ms, connection_id)).rowcount

    def state(self, delivery_id: int) -> str | None:
        row = fetch_one(self.conn, self.SQL_STATE, (delivery_id,))
        return row[0] if row else None

    def delivery(self, delivery_id: int) -> tuple | None:
        """(status, attempts, target status, url template, method, conversion id, tid, payout,
        currency, click id, campaign name)."""
        return fetch_one(self.conn, self.SQL_DELIVERY, (delivery_id,))

    def click_values(self, click_id: int, columns: tuple[str, ...]) -> dict[str, object]:
        """The click's values of these columns (the macros a template may use)."""
        row = fetch_one(self.conn, f"SELECT {', '.join(columns)} FROM click WHERE id = ?", (click_id,))
        return dict(zip(columns, row, strict=True)) if row else {}

    def mark_sent(self, delivery_id: int, url: str, code: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_SENT, (url, code, now_ms, delivery_id)).close()

    def mark_not_sent(
        self,
        delivery_id: int,
        state: str,
        url: str,
        code: int | None,
        error: str,
        next_attempt_ms: int,
        now_ms: int,
    ) -> None:
        self.conn.execute(
            self.SQL_NOT_SENT, (state, url, code, error, next_attempt_ms, now_ms, delivery_id)
        ).close()

    def due(self, now_ms: int, limit: int) -> list[int]:
        return [row[0] for row in self.conn.execute(self.SQL_DUE, (now_ms, limit)).fetchall()]

    def pending_count(self) -> int:
        return fetch_single(self.conn, self.SQL_PENDING)[0]

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_DUE: str

    @abstractmethod
    def claim_due_events(self, connection_id: int, now_ms: int, until_ms: int, limit: int) -> list[int]:
        """Claim up to `limit` of the connection's due events for one attempt (until `until_ms`), oldest
        first, in the caller's transaction: a request's batch-mates. Their ids."""

    @abstractmethod
    def _queued_id(self, sql: str, params: tuple) -> int | None:
        """Run SQL_QUEUE or SQL_QUEUE_EVENT; the new delivery's id, None if it was queued before."""
