"""Conversions (`conversion`, with the click and offer a postback reads) and the postback log
(`postback_log`).

The rules (which status a word maps to, which changes are allowed, what a postback without a tid
means, when a parked postback expires) are models/conversions/postbacks.py's; the statements are
here. Every write joins the caller's transaction: a postback's effect and its log row commit together.

PERF: a postback runs up to ~10 of these; each is a prepared statement (sqlite3 caches them per
connection) behind one method call, and the recorder keeps one store per connection.
"""

from __future__ import annotations

from abc import abstractmethod

from models.choices import SUB_ID_SLOTS
from models.store.history import ROW_COLUMNS, HistoryStore
from models.store.rows import Store, fetch_one, fetch_single

SELECT_CONVERSION = (
    "SELECT id, tid, status, payout, cost, currency, report_payout, original_status, raw_status, "
    "created_at FROM conversion"
)


class ConversionStore(Store):
    """The conversions of one connection, and the clicks and offers they are recorded against."""

    SQL_FIND_CLICK = "SELECT id, campaign_id, stream_id, offer_id, created_at FROM click WHERE subid = ?"
    SQL_HAS_CLICK = "SELECT 1 FROM click WHERE subid = ?"
    SQL_OFFER_PAYOUT = "SELECT payout, currency FROM offer WHERE id = ?"
    SQL_MAPPED_STATUS = """
SELECT status FROM status_map WHERE raw_status = ? AND network IN (?, '') ORDER BY network DESC LIMIT 1
"""
    SQL_CONVERSION_BY_TID = SELECT_CONVERSION + " WHERE subid = ? AND tid = ?"
    SQL_NETWORK_RULES = "SELECT status_changes, rebills FROM network WHERE alias = ?"
    SQL_OFFER_NETWORK_RULES = """
SELECT n.status_changes, n.rebills FROM offer AS o JOIN network AS n ON n.id = o.network_id WHERE o.id = ?
"""
    SQL_HAS_SALE = "SELECT 1 FROM conversion WHERE subid = ? AND status IN ('sale', 'rebill') LIMIT 1"
    SQL_INSERT_CONVERSION = """
INSERT INTO conversion (subid, tid, status, original_status, raw_status, network, payout, currency,
    report_payout, cost, click_id, campaign_id, stream_id, offer_id, click_created_at, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
    SQL_CHANGE_STATUS = """
UPDATE conversion SET tid = ?, status = ?, original_status = ?, previous_status = ?, raw_status = ?,
    payout = ?, currency = ?, report_payout = ?, cost = ?, updated_at = ? WHERE id = ?
"""
    SQL_ADOPT_TID = "UPDATE conversion SET tid = ?, updated_at = ? WHERE id = ?"
    # One statement per slot, built once: a column name cannot be a parameter, and only the bounded
    # slots (models/choices.py) have one.
    SQL_SET_SUB_ID = {
        slot: f"UPDATE click SET sub_id_{slot} = ? WHERE id = ?" for slot in range(1, SUB_ID_SLOTS + 1)
    }

    # A click only the columnar history holds, back in the row store with its own id (ip and user agent
    # are not in the history: empty). Its copy in the history stays the one readers trust (its id is at
    # or below the position); a concurrent identical postback's insert is a no-op.
    SQL_REVIVE_CLICK = (
        f"INSERT INTO click ({', '.join(ROW_COLUMNS)}, ip, user_agent, ua_hash) "
        f"VALUES ({', '.join('?' * len(ROW_COLUMNS))}, '', '', 0) ON CONFLICT DO NOTHING"
    )

    __slots__ = ()

    def find_click(self, subid: str) -> tuple | None:
        """(id, campaign id, stream id, offer id, created_at) of the stored click, None if not landed."""
        return fetch_one(self.conn, self.SQL_FIND_CLICK, (subid,))

    def has_click(self, subid: str) -> bool:
        """Whether the row store has the click (a plain read: no lock, outside any write transaction)."""
        return fetch_one(self.conn, self.SQL_HAS_CLICK, (subid,)) is not None

    def revive_click(self, values: tuple) -> None:
        """Put a click the history holds (ROW_COLUMNS, `referrer` its domain) back in the row store."""
        self.conn.execute(self.SQL_REVIVE_CLICK, values).close()

    def offer_payout(self, offer_id: int) -> tuple[float, str] | None:
        """(payout, currency) of the offer."""
        return fetch_one(self.conn, self.SQL_OFFER_PAYOUT, (offer_id,))

    def mapped_status(self, raw_status: str, network: str) -> str | None:
        """The status a `lanner postback status map` gives this word: the network's own map first."""
        row = fetch_one(self.conn, self.SQL_MAPPED_STATUS, (raw_status, network))
        return row[0] if row else None

    def network_rules(self, alias: str, offer_id: int | None) -> tuple[str, str] | None:
        """(status_changes, rebills) of the network the postback names (`from=`), else of the click's
        offer's network; None when neither names one."""
        row = fetch_one(self.conn, self.SQL_NETWORK_RULES, (alias,)) if alias else None
        if row is None and offer_id:
            row = fetch_one(self.conn, self.SQL_OFFER_NETWORK_RULES, (offer_id,))
        return row

    def has_sale(self, subid: str) -> bool:
        """Whether the click has a sale or a rebill already."""
        return fetch_one(self.conn, self.SQL_HAS_SALE, (subid,)) is not None

    def conversion_by_tid(self, subid: str, tid: str) -> tuple | None:
        """(id, tid, status, payout, cost, currency, report payout, original status, raw status, created
        at)."""
        return fetch_one(self.conn, self.SQL_CONVERSION_BY_TID, (subid, tid))

    def conversions_of_click(self, subid: str) -> list[tuple]:
        """Up to two of the click's conversions (enough to tell one from several), as conversion_by_tid."""
        return self.conn.execute(self.SQL_CONVERSIONS_OF_CLICK, (subid,)).fetchall()

    def insert(
        self,
        subid: str,
        tid: str,
        status: str,
        raw_status: str,
        network: str,
        payout: float,
        currency: str,
        report_payout: float | None,
        cost: float,
        click_id: int,
        campaign_id: int,
        stream_id: int | None,
        offer_id: int | None,
        click_created_at: int,
        now_ms: int,
    ) -> int:
        """A new conversion, its first status also its original one; its id."""
        HistoryStore(self.conn).guard()  # PostgreSQL: no id below the history's watermark uncommitted.
        return self._inserted_id(
            self.SQL_INSERT_CONVERSION,
            (
                subid,
                tid,
                status,
                status,
                raw_status,
                network,
                payout,
                currency,
                report_payout,
                cost,
                click_id,
                campaign_id,
                stream_id,
                offer_id,
                click_created_at,
                now_ms,
                now_ms,
            ),
        )

    def write_status(
        self,
        conversion_id: int,
        tid: str,
        status: str,
        original_status: str,
        previous_status: str,
        raw_status: str,
        payout: float,
        currency: str,
        report_payout: float | None,
        cost: float,
        now_ms: int,
    ) -> None:
        """Store a conversion's new status and amounts: for models/conversions/postbacks.change_status only,
        the one place a status changes."""
        self.conn.execute(
            self.SQL_CHANGE_STATUS,
            (
                tid,
                status,
                original_status,
                previous_status,
                raw_status,
                payout,
                currency,
                report_payout,
                cost,
                now_ms,
                conversion_id,
            ),
        ).close()
        # Copied again. After the row's own lock, as every change of a conversion queues it: two
        # writers never hold the queue's row and the conversion's in opposite orders (PostgreSQL).
        HistoryStore(self.conn).record_conversion_changes([conversion_id])

    def adopt_tid(self, conversion_id: int, tid: str, now_ms: int) -> None:
        """Give a conversion stored without a tid the one its next postback brought."""
        self.conn.execute(self.SQL_ADOPT_TID, (tid, now_ms, conversion_id)).close()

    def set_sub_id(self, click_id: int, slot: int, value: str) -> None:
        """Set the click's sub_id_<slot> (1 to SUB_ID_SLOTS; any other slot is a KeyError)."""
        self.conn.execute(self.SQL_SET_SUB_ID[slot], (value, click_id)).close()
        HistoryStore(self.conn).record_changes([click_id])  # The columnar history copies it again.

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_CONVERSIONS_OF_CLICK: str

    @abstractmethod
    def _inserted_id(self, sql: str, params: tuple) -> int:
        """Run an INSERT; the new row's id."""


class PostbackLogStore(Store):
    """The postback log of one connection: every postback as received, and the parked ones' wait."""

    SQL_LOG = """
INSERT INTO postback_log (received_at, method, remote_ip, request, subid, tid, raw_status, params,
    verdict, detail, conversion_id, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
    SQL_SETTLE_PARKED = "UPDATE postback_log SET verdict = ?, detail = ?, conversion_id = ? WHERE id = ?"
    SQL_PARKED_SUBIDS = "SELECT DISTINCT subid FROM postback_log WHERE verdict = 'parked' LIMIT 1000"
    SQL_EXPIRE_PARKED = """
UPDATE postback_log SET verdict = 'expired', detail = 'No click with this subid arrived in time.'
WHERE verdict = 'parked' AND expires_at <= ?
"""

    __slots__ = ()

    def log(
        self,
        received_at: int,
        method: str,
        remote_ip: str,
        request: str,
        subid: str,
        tid: str,
        raw_status: str,
        params: str,
        verdict: str,
        detail: str,
        conversion_id: int | None,
        expires_at: int | None,
    ) -> None:
        """One postback as received (`params`: the parsed postback as JSON), with its verdict."""
        self.conn.execute(
            self.SQL_LOG,
            (
                received_at,
                method,
                remote_ip,
                request,
                subid,
                tid,
                raw_status,
                params,
                verdict,
                detail,
                conversion_id,
                expires_at,
            ),
        ).close()

    def count_parked(self) -> int:
        """Postbacks waiting for their click to land."""
        return fetch_single(self.conn, self.SQL_COUNT_PARKED)[0]

    def any_parked(self) -> bool:
        return fetch_one(self.conn, self.SQL_PARKED_ANY) is not None

    def parked_subids(self) -> list[str]:
        """The subids of up to 1,000 parked postbacks."""
        return [row[0] for row in self.conn.execute(self.SQL_PARKED_SUBIDS).fetchall()]

    def parked_landed(self) -> list[tuple[int, str, int]]:
        """(log id, params, received_at) of up to 500 parked postbacks whose click has landed, oldest
        first."""
        return self.conn.execute(self.SQL_PARKED_LANDED).fetchall()

    def settle_parked(self, log_id: int, verdict: str, detail: str, conversion_id: int | None) -> None:
        """A parked postback's verdict now that its click landed."""
        self.conn.execute(self.SQL_SETTLE_PARKED, (verdict, detail, conversion_id, log_id)).close()

    def expire_parked(self, now_ms: int) -> None:
        """Parked postbacks whose wait ended before `now_ms` are expired."""
        self.conn.execute(self.SQL_EXPIRE_PARKED, (now_ms,)).close()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_COUNT_PARKED: str
    SQL_PARKED_ANY: str
    SQL_PARKED_LANDED: str
