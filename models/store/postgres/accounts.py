"""accounts on PostgreSQL: what differs from SQLite (models/store/sqlite/accounts.py);
the rest is models/store/accounts.py's.

- A new row's id comes back through `RETURNING id`: psycopg has no `cursor.lastrowid`.
- app_user.name is COLLATE lanner_nocase (schema.py), so `name = ?` ignores case as SQLite's NOCASE
  column does (names are ASCII, models/accounts/users.py NAME_PATTERN, where the two agree). ORDER BY
  on that column would sort by ICU's rules, not SQLite's (ASCII folded, then bytes): the shares list
  sorts by `lower(name COLLATE "C")`, which folds only ASCII and compares bytes, as NOCASE does.
"""

from __future__ import annotations

from models.store import accounts as base


class AccountStore(base.AccountStore):
    """The accounts rows of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_INSERT_USER = base.AccountStore.SQL_INSERT_USER + " RETURNING id"
    SQL_INSERT_API_KEY = base.AccountStore.SQL_INSERT_API_KEY + " RETURNING id"
    SQL_CAMPAIGN_SHARES = (
        "SELECT s.user_id, u.name, s.may_edit "
        "FROM campaign_share AS s JOIN app_user AS u ON u.id = s.user_id "
        'WHERE s.campaign_id = ? ORDER BY lower(u.name COLLATE "C")'
    )

    def insert_user(
        self, name: str, role: str, password_hash: str, hides_money: bool, timezone: str, now_ms: int
    ) -> int:
        parameters = (name, role, password_hash, int(hides_money), timezone, now_ms, now_ms)
        return self._returning_id(self.SQL_INSERT_USER, parameters)

    def insert_api_key(
        self, user_id: int, key_hash: str, prefix: str, scope: str, label: str, now_ms: int
    ) -> int:
        parameters = (user_id, key_hash, prefix, scope, label, now_ms)
        return self._returning_id(self.SQL_INSERT_API_KEY, parameters)

    def _returning_id(self, sql: str, parameters: tuple) -> int:
        cursor = self.conn.execute(sql, parameters)
        try:
            return cursor.fetchone()[0]
        finally:
            cursor.close()
