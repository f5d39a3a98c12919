"""Exchange rates (`exchange_rate`), the conversions waiting for one, and the currency labels of
offers, campaigns and conversions.

The rules (which rate an amount converts at, when a report currency may change, what a relabel
means) are models/reporting/currency.py's.
"""

from __future__ import annotations

from models.store.rows import Store, fetch_one, fetch_single


class CurrencyStore(Store):
    """The rates and currency labels of one connection; writes join the caller's transaction."""

    SQL_LATEST_RATE = "SELECT rate FROM exchange_rate WHERE currency = ? ORDER BY valid_from DESC LIMIT 1"
    SQL_LATEST_RATES = """
SELECT r.currency, r.rate, r.valid_from, r.source FROM exchange_rate AS r
WHERE r.valid_from = (SELECT MAX(valid_from) FROM exchange_rate WHERE currency = r.currency)
ORDER BY r.currency
"""
    SQL_ALL_RATES = (
        "SELECT currency, rate, valid_from, source FROM exchange_rate ORDER BY currency, valid_from"
    )
    SQL_INSERT_RATE = """
INSERT INTO exchange_rate (currency, valid_from, rate, source) VALUES (?, ?, ?, ?)
ON CONFLICT (currency, valid_from) DO UPDATE SET rate = excluded.rate, source = excluded.source
"""
    SQL_HAS_RATES = "SELECT EXISTS (SELECT 1 FROM exchange_rate)"
    SQL_CONVERT = "UPDATE conversion SET report_payout = ?, cost = ? WHERE id = ?"
    SQL_CAMPAIGN_COST = "SELECT cost_model, cost_value, cost_currency FROM campaign WHERE id = ?"
    SQL_HOLDS_MONEY = """
SELECT EXISTS (SELECT 1 FROM click) OR EXISTS (SELECT 1 FROM conversion)
    OR EXISTS (SELECT 1 FROM exchange_rate)
"""
    SQL_RELABEL_OFFERS = "UPDATE offer SET currency = ? WHERE currency = ?"
    SQL_RELABEL_CAMPAIGNS = "UPDATE campaign SET cost_currency = ? WHERE cost_currency = ?"
    SQL_RELABEL_CONVERSIONS = "UPDATE conversion SET currency = ? WHERE currency = ?"

    __slots__ = ()

    def latest_rate(self, currency: str) -> float | None:
        """The rate stored last for `currency` (one unit in the report currency); None if none is."""
        row = fetch_one(self.conn, self.SQL_LATEST_RATE, (currency,))
        return row[0] if row else None

    def rates(self, *, history: bool = False) -> list[tuple[str, float, int, str]]:
        """(currency, rate, valid_from, source): each currency's latest, or every rate (`history`)."""
        return self.conn.execute(self.SQL_ALL_RATES if history else self.SQL_LATEST_RATES).fetchall()

    def insert_rate(self, currency: str, valid_from: int, rate: float, source: str) -> None:
        """The rate from `valid_from` (Unix ms) on; one stored for that moment already is replaced."""
        self.conn.execute(self.SQL_INSERT_RATE, (currency, valid_from, rate, source)).close()

    def has_rates(self) -> bool:
        return bool(fetch_single(self.conn, self.SQL_HAS_RATES)[0])

    def unconverted(self, currency: str) -> list[tuple[int, int, int, str, float, float]]:
        """(id, click id, campaign id, status, payout, cost) of the conversions received in `currency`
        that wait for a rate (no report payout)."""
        return self.conn.execute(self.SQL_UNCONVERTED_OF, (currency,)).fetchall()

    def convert(self, conversion_id: int, report_payout: float, cost: float) -> None:
        self.conn.execute(self.SQL_CONVERT, (report_payout, cost, conversion_id)).close()

    def campaign_cost(self, campaign_id: int) -> tuple[str, float, str] | None:
        """(cost model, cost value, cost currency) of the campaign; None if there is none."""
        return fetch_one(self.conn, self.SQL_CAMPAIGN_COST, (campaign_id,))

    def holds_money(self) -> bool:
        """Whether any click, conversion or rate is stored (an amount in the report currency)."""
        return bool(fetch_single(self.conn, self.SQL_HOLDS_MONEY)[0])

    def relabel_offers_and_campaigns(self, old: str, new: str) -> None:
        """Offers' payout currency and campaigns' cost currency `old` become `new`."""
        self.conn.execute(self.SQL_RELABEL_OFFERS, (new, old)).close()
        self.conn.execute(self.SQL_RELABEL_CAMPAIGNS, (new, old)).close()

    def relabel_conversions(self, old: str, new: str) -> int:
        """Conversions received in `old` are said to be in `new`; how many."""
        return self.conn.execute(self.SQL_RELABEL_CONVERSIONS, (new, old)).rowcount

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_UNCONVERTED_OF: str
