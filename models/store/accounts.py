"""Users, campaign ownership and shares, and API keys: every statement on app_user, campaign_share
and api_key, and the ownership reads of campaign.

The rules (who sees and edits what, how a key is hashed, when last-used moves) are
models/accounts/'s; these only read and write rows. Writes join the caller's transaction.
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.rows import Store, fetch_one, fetch_single

USER_COLUMNS = (
    "id, name, role, password_hash, hides_money, is_disabled, created_at, updated_at, timezone, last_login_at"
)
API_KEY_COLUMNS = (
    "k.id, k.user_id, u.name, k.scope, k.label, k.prefix, k.created_at, k.last_used_at, k.is_revoked"
)


def changes_one_row(conn, sql: str, params: tuple) -> bool:
    """Whether the statement changed exactly one row, its cursor closed. The count is read before the
    close: psycopg's close() forgets it (sqlite3's keeps it)."""
    cursor = conn.execute(sql, params)
    rowcount = cursor.rowcount
    cursor.close()
    return rowcount == 1


class AccountStore(Store):
    """The accounts rows of one connection; writes join the caller's transaction."""

    SQL_USERS = f"SELECT {USER_COLUMNS} FROM app_user ORDER BY id"
    SQL_USER_BY_NAME = f"SELECT {USER_COLUMNS} FROM app_user WHERE name = ?"  # NOCASE column.
    SQL_USER_BY_ID = f"SELECT {USER_COLUMNS} FROM app_user WHERE id = ?"
    SQL_HAS_USERS = "SELECT EXISTS (SELECT 1 FROM app_user)"
    SQL_ENABLED_ADMINS = "SELECT COUNT(*) FROM app_user WHERE role = 'admin' AND is_disabled = 0"
    SQL_INSERT_USER = (
        "INSERT INTO app_user (name, role, password_hash, hides_money, is_disabled, timezone, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?)"
    )
    SQL_UPDATE_USER = (
        "UPDATE app_user SET role = ?, hides_money = ?, is_disabled = ?, timezone = ?, updated_at = ? "
        "WHERE id = ?"
    )
    SQL_SET_LAST_LOGIN = "UPDATE app_user SET last_login_at = ? WHERE id = ?"
    SQL_SET_PASSWORD_HASH = "UPDATE app_user SET password_hash = ?, updated_at = ? WHERE id = ?"
    # A rehash on login: only over the hash it verified, so a password changed meanwhile stays.
    SQL_REPLACE_PASSWORD_HASH = "UPDATE app_user SET password_hash = ? WHERE id = ? AND password_hash = ?"
    SQL_DELETE_USER = "DELETE FROM app_user WHERE id = ?"

    SQL_CAMPAIGN_OWNER = "SELECT owner_id FROM campaign WHERE id = ?"
    SQL_OWNED_CAMPAIGNS = "SELECT id FROM campaign WHERE owner_id = ?"
    SQL_SHARE = (
        "INSERT INTO campaign_share (campaign_id, user_id, may_edit, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (campaign_id, user_id) DO UPDATE SET may_edit = excluded.may_edit"
    )
    SQL_SHARE_OF = "SELECT may_edit FROM campaign_share WHERE campaign_id = ? AND user_id = ?"
    SQL_UNSHARE = "DELETE FROM campaign_share WHERE campaign_id = ? AND user_id = ?"
    SQL_SHARED_WITH = "SELECT campaign_id, may_edit FROM campaign_share WHERE user_id = ?"

    SQL_INSERT_API_KEY = (
        "INSERT INTO api_key (user_id, key_hash, prefix, scope, label, created_at) VALUES (?, ?, ?, ?, ?, ?)"
    )
    SQL_API_KEYS = (
        f"SELECT {API_KEY_COLUMNS} FROM api_key AS k JOIN app_user AS u ON u.id = k.user_id ORDER BY k.id"
    )
    SQL_API_KEY = (
        f"SELECT {API_KEY_COLUMNS} FROM api_key AS k JOIN app_user AS u ON u.id = k.user_id WHERE k.id = ?"
    )
    # What authenticating a key needs, in one indexed read: the key's row and its owner's.
    SQL_KEY_HOLDER = (
        "SELECT k.id, k.scope, k.is_revoked, k.last_used_at, "
        "u.id, u.name, u.role, u.hides_money, u.is_disabled "
        "FROM api_key AS k JOIN app_user AS u ON u.id = k.user_id WHERE k.key_hash = ?"
    )
    SQL_REVOKE_API_KEY = "UPDATE api_key SET is_revoked = 1 WHERE id = ? AND is_revoked = 0"
    # Only when the stored time is older than `?` (the throttle): concurrent requests write once.
    SQL_TOUCH_API_KEY = (
        "UPDATE api_key SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)"
    )

    __slots__ = ()

    # -- users

    def users(self) -> list[tuple]:
        """Every user, as USER_COLUMNS, oldest first."""
        return self.conn.execute(self.SQL_USERS).fetchall()

    def user_by_name(self, name: str) -> tuple | None:
        return fetch_one(self.conn, self.SQL_USER_BY_NAME, (name,))

    def user_by_id(self, user_id: int) -> tuple | None:
        return fetch_one(self.conn, self.SQL_USER_BY_ID, (user_id,))

    def has_users(self) -> bool:
        return bool(fetch_single(self.conn, self.SQL_HAS_USERS)[0])

    def enabled_admins(self) -> int:
        return fetch_single(self.conn, self.SQL_ENABLED_ADMINS)[0]

    def update_user(
        self, user_id: int, role: str, hides_money: bool, is_disabled: bool, timezone: str, now_ms: int
    ) -> None:
        self.conn.execute(
            self.SQL_UPDATE_USER, (role, int(hides_money), int(is_disabled), timezone, now_ms, user_id)
        ).close()

    def set_last_login(self, user_id: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_SET_LAST_LOGIN, (now_ms, user_id)).close()

    def set_password_hash(self, user_id: int, password_hash: str, now_ms: int) -> None:
        self.conn.execute(self.SQL_SET_PASSWORD_HASH, (password_hash, now_ms, user_id)).close()

    def replace_password_hash(self, user_id: int, old_hash: str, new_hash: str) -> bool:
        """Swap the hash only if it is still `old_hash`; whether it did."""
        return changes_one_row(self.conn, self.SQL_REPLACE_PASSWORD_HASH, (new_hash, user_id, old_hash))

    def delete_user(self, user_id: int) -> None:
        """Its keys and shares go with it (ON DELETE CASCADE); its campaigns become nobody's."""
        self.conn.execute(self.SQL_DELETE_USER, (user_id,)).close()

    # -- ownership and shares

    def campaign_owner(self, campaign_id: int) -> int | None:
        row = fetch_one(self.conn, self.SQL_CAMPAIGN_OWNER, (campaign_id,))
        return row[0] if row else None

    def owned_campaigns(self, user_id: int) -> set[int]:
        return {row[0] for row in self.conn.execute(self.SQL_OWNED_CAMPAIGNS, (user_id,)).fetchall()}

    def shared_with(self, user_id: int) -> dict[int, bool]:
        """campaign id -> may_edit, for every campaign shared with the user."""
        rows = self.conn.execute(self.SQL_SHARED_WITH, (user_id,)).fetchall()
        return {campaign_id: bool(may_edit) for campaign_id, may_edit in rows}

    def share_of(self, campaign_id: int, user_id: int) -> bool | None:
        """may_edit of the share, None if the campaign is not shared with the user."""
        row = fetch_one(self.conn, self.SQL_SHARE_OF, (campaign_id, user_id))
        return bool(row[0]) if row else None

    def campaign_shares(self, campaign_id: int) -> list[tuple[int, str, bool]]:
        """(user id, name, may_edit) of every user the campaign is shared with, by name."""
        rows = self.conn.execute(self.SQL_CAMPAIGN_SHARES, (campaign_id,)).fetchall()
        return [(user_id, name, bool(may_edit)) for user_id, name, may_edit in rows]

    def share(self, campaign_id: int, user_id: int, may_edit: bool, now_ms: int) -> None:
        self.conn.execute(self.SQL_SHARE, (campaign_id, user_id, int(may_edit), now_ms)).close()

    def unshare(self, campaign_id: int, user_id: int) -> bool:
        return changes_one_row(self.conn, self.SQL_UNSHARE, (campaign_id, user_id))

    # -- API keys

    def api_keys(self) -> list[tuple]:
        """Every key as API_KEY_COLUMNS (with its owner's name), oldest first."""
        return self.conn.execute(self.SQL_API_KEYS).fetchall()

    def api_key(self, key_id: int) -> tuple | None:
        return fetch_one(self.conn, self.SQL_API_KEY, (key_id,))

    def key_holder(self, key_hash: str) -> tuple | None:
        """(key id, scope, is_revoked, last_used_at, user id, name, role, hides_money, is_disabled)."""
        return fetch_one(self.conn, self.SQL_KEY_HOLDER, (key_hash,))

    def revoke_api_key(self, key_id: int) -> bool:
        """Whether it was live until now."""
        return changes_one_row(self.conn, self.SQL_REVOKE_API_KEY, (key_id,))

    def touch_api_key(self, key_id: int, now_ms: int, unless_since_ms: int) -> None:
        """Set last_used_at to now unless it is already at or after `unless_since_ms`."""
        self.conn.execute(self.SQL_TOUCH_API_KEY, (now_ms, key_id, unless_since_ms)).close()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_CAMPAIGN_SHARES: str

    @abstractmethod
    def insert_user(
        self, name: str, role: str, password_hash: str, hides_money: bool, timezone: str, now_ms: int
    ) -> int: ...

    @abstractmethod
    def insert_api_key(
        self, user_id: int, key_hash: str, prefix: str, scope: str, label: str, now_ms: int
    ) -> int: ...
