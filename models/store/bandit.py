"""Smart rotation's shares (`bandit_share` for offers, `bandit_lander_share` for landers): written by
the minutely refresh, read by web workers.

The rules (what a share is) are models/routing/bandit.py's; the refresh is models/reporting/bandits.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from models.store.rows import Store


class BanditStore(Store):
    """The bandit shares of one connection; `replace` joins the caller's transaction."""

    SQL_SHARES = "SELECT stream_id, offer_id, share FROM bandit_share"
    SQL_STREAM = (
        "SELECT offer_id, clicks, conversions, revenue, best_probability, share, updated_at "
        "FROM bandit_share WHERE stream_id = ? ORDER BY offer_id"
    )
    SQL_CLEAR = "DELETE FROM bandit_share"
    SQL_INSERT = (
        "INSERT INTO bandit_share "
        "(stream_id, offer_id, clicks, conversions, revenue, best_probability, share, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    SQL_LANDER_SHARES = "SELECT stream_id, lander_id, share FROM bandit_lander_share"
    SQL_LANDER_STREAM = (
        "SELECT lander_id, clicks, conversions, revenue, best_probability, share, updated_at "
        "FROM bandit_lander_share WHERE stream_id = ? ORDER BY lander_id"
    )
    SQL_LANDER_CLEAR = "DELETE FROM bandit_lander_share"
    SQL_LANDER_INSERT = (
        "INSERT INTO bandit_lander_share "
        "(stream_id, lander_id, clicks, conversions, revenue, best_probability, share, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    __slots__ = ()

    def shares(self) -> list[tuple[int, int, float]]:
        """(stream id, offer id, share) of every stream in a bandit rotation."""
        return self.conn.execute(self.SQL_SHARES).fetchall()

    def stream(self, stream_id: int) -> list[tuple]:
        """(offer id, clicks, conversions, revenue, best probability, share, updated at) of one stream."""
        return self.conn.execute(self.SQL_STREAM, (stream_id,)).fetchall()

    def replace(self, rows: Iterable[tuple]) -> None:
        """Every stream's rows, as (stream id, offer id, clicks, conversions, revenue, best probability,
        share, updated at): streams no longer in a bandit rotation lose theirs."""
        self.conn.execute(self.SQL_CLEAR).close()
        self.conn.executemany(self.SQL_INSERT, list(rows)).close()

    def lander_shares(self) -> list[tuple[int, int, float]]:
        """(stream id, lander id, share) of every stream in a lander bandit rotation."""
        return self.conn.execute(self.SQL_LANDER_SHARES).fetchall()

    def lander_stream(self, stream_id: int) -> list[tuple]:
        """(lander id, clicks, conversions, revenue, best probability, share, updated at) of one stream."""
        return self.conn.execute(self.SQL_LANDER_STREAM, (stream_id,)).fetchall()

    def replace_landers(self, rows: Iterable[tuple]) -> None:
        """`replace` for the landers' rows (the lander id in the offer id's place)."""
        self.conn.execute(self.SQL_LANDER_CLEAR).close()
        self.conn.executemany(self.SQL_LANDER_INSERT, list(rows)).close()
