"""Outbound postback deliveries (`postback_delivery`): queued, claimed, sent or given up.

The rules (what to send, when to retry, when to give up) are models/conversions/outbound.py's; the
statements are here. A delivery is queued in the transaction of the conversion change that calls
for it; a sender claims it (moves its next attempt past the request's timeout) before sending, so
two senders never send one delivery at once.
"""

from __future__ import annotations

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
    SQL_CLAIM = """
UPDATE postback_delivery SET next_attempt_at = ?, attempts = attempts + 1, updated_at = ?
WHERE id = ? AND state = 'pending' AND next_attempt_at <= ?
"""
    SQL_STATE = "SELECT state FROM postback_delivery WHERE id = ?"
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

    __slots__ = ()

    def queue(self, campaign_id: int, conversion_id: int, status: str, now_ms: int) -> list[int]:
        """A delivery to every active target of the campaign that wants `status`; the new ids."""
        ids = []
        for target_id, statuses in self.conn.execute(self.SQL_TARGETS, (campaign_id,)).fetchall():
            if status in statuses.split(","):
                delivery_id = self._queued_id((conversion_id, target_id, status, now_ms, now_ms, now_ms))
                if delivery_id is not None:
                    ids.append(delivery_id)
        return ids

    def claim(self, delivery_id: int, now_ms: int, until_ms: int) -> bool:
        """Take a pending, due delivery for one attempt (until `until_ms`); False if it is not."""
        return bool(self.conn.execute(self.SQL_CLAIM, (until_ms, now_ms, delivery_id, now_ms)).rowcount)

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
    def _queued_id(self, params: tuple) -> int | None:
        """Run SQL_QUEUE; the new delivery's id, None if it was queued before."""
