"""accounts on SQLite: what differs from PostgreSQL (models/store/postgres/accounts.py); the rest is
models/store/accounts.py's."""

from __future__ import annotations

from models.store import accounts as base


class AccountStore(base.AccountStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_CAMPAIGN_SHARES = (
        "SELECT s.user_id, u.name, s.may_edit "
        "FROM campaign_share AS s JOIN app_user AS u ON u.id = s.user_id "
        "WHERE s.campaign_id = ? ORDER BY u.name"
    )

    def insert_user(
        self, name: str, role: str, password_hash: str, hides_money: bool, timezone: str, now_ms: int
    ) -> int:
        cursor = self.conn.execute(
            self.SQL_INSERT_USER, (name, role, password_hash, int(hides_money), timezone, now_ms, now_ms)
        )
        cursor.close()
        return cursor.lastrowid

    def insert_api_key(
        self, user_id: int, key_hash: str, prefix: str, scope: str, label: str, now_ms: int
    ) -> int:
        cursor = self.conn.execute(self.SQL_INSERT_API_KEY, (user_id, key_hash, prefix, scope, label, now_ms))
        cursor.close()
        return cursor.lastrowid
