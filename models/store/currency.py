"""Exchange rates (`exchange_rate`), the conversions waiting for one, and the currency labels of
offers, campaigns and conversions.

The rules (which rate an amount converts at, when a report currency may change, what a relabel
means) are models/reporting/currency.py's.
"""

from __future__ import annotations

from models.store.history import HistoryStore
from models.store.rows import Store, fetch_one, fetch_single

# The sources of rates set by hand; a fetched rate's source is the feed's host.
MANUAL_SOURCES = ("manual", "api", "panel")
_MANUAL_LIST = ", ".join(f"'{source}'" for source in MANUAL_SOURCES)


class CurrencyStore(Store):
    """The rates and currency labels of one connection; writes join the caller's transaction."""

    SQL_RATE_AT = """
SELECT rate FROM exchange_rate WHERE currency = ? AND valid_from <= ? ORDER BY valid_from DESC LIMIT 1
"""
    SQL_FIRST_RATE = "SELECT rate FROM exchange_rate WHERE currency = ? ORDER BY valid_from LIMIT 1"
    SQL_RATE_ON = "SELECT rate, source FROM exchange_rate WHERE currency = ? AND valid_from = ?"
    SQL_HAS_EARLIER = "SELECT EXISTS (SELECT 1 FROM exchange_rate WHERE currency = ? AND valid_from < ?)"
    SQL_NEXT_FROM = "SELECT MIN(valid_from) FROM exchange_rate WHERE currency = ? AND valid_from > ?"
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
    # A fetched rate never replaces one set by hand (the CLI, the API, the panel) for the same day.
    SQL_INSERT_FETCHED_RATE = f"""
INSERT INTO exchange_rate (currency, valid_from, rate, source) VALUES (?, ?, ?, ?)
ON CONFLICT (currency, valid_from) DO UPDATE SET rate = excluded.rate, source = excluded.source
WHERE exchange_rate.source NOT IN ({_MANUAL_LIST})
"""
    # PERF: by conversion_created_at; a day of conversions, or all of one currency's for its first rate.
    SQL_CONVERSIONS_BETWEEN = """
SELECT id, click_id, campaign_id, status, payout, cost, report_payout FROM conversion
WHERE currency = ? AND created_at >= ? AND created_at < ?
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

    def rate_at(self, currency: str, at_ms: int) -> float | None:
        """The rate in force at `at_ms` (the latest from at or before it; the first one stored for a time
        before any); None if `currency` has none."""
        row = fetch_one(self.conn, self.SQL_RATE_AT, (currency, at_ms))
        if row is None:
            row = fetch_one(self.conn, self.SQL_FIRST_RATE, (currency,))
        return row[0] if row else None

    def rate_on(self, currency: str, valid_from: int) -> tuple[float, str] | None:
        """(rate, source) stored for exactly `valid_from`; None if none is."""
        return fetch_one(self.conn, self.SQL_RATE_ON, (currency, valid_from))

    def rate_span(self, currency: str, valid_from: int) -> tuple[int | None, int | None]:
        """The times the rate from `valid_from` applies to: [start, end), None for no bound (a rate
        before any other also applies to the time before it; the last one, from then on)."""
        has_earlier = fetch_single(self.conn, self.SQL_HAS_EARLIER, (currency, valid_from))[0]
        following = fetch_single(self.conn, self.SQL_NEXT_FROM, (currency, valid_from))[0]
        return (valid_from if has_earlier else None), following

    def insert_fetched_rate(self, currency: str, valid_from: int, rate: float, source: str) -> bool:
        """As insert_rate, unless a rate set by hand is stored for that moment; whether it was stored."""
        cursor = self.conn.execute(self.SQL_INSERT_FETCHED_RATE, (currency, valid_from, rate, source))
        stored = cursor.rowcount > 0
        cursor.close()
        return stored

    def conversions_between(
        self, currency: str, start: int | None, end: int | None
    ) -> list[tuple[int, int, int, str, float, float, float | None]]:
        """(id, click id, campaign id, status, payout, cost, report payout) of the conversions received
        in `currency` and recorded in [start, end) (None: no bound)."""
        bounds = (-(1 << 62) if start is None else start, (1 << 62) if end is None else end)
        return self.conn.execute(self.SQL_CONVERSIONS_BETWEEN, (currency, *bounds)).fetchall()

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
        HistoryStore(self.conn).record_conversion_changes([conversion_id])  # Copied again.

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
        changed = self.conn.execute(self.SQL_RELABEL_CONVERSIONS, (new, old)).rowcount
        # Their copies are copied again (with those received in `new` already: a few more, harmless),
        # queued after the rows' own locks as every conversion change is.
        HistoryStore(self.conn).record_currency_changes(new)
        return changed

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_UNCONVERTED_OF: str
