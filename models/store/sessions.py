"""The panel's sessions and failed logins: every statement on panel_session, login_failure and
login_address.

The rules (id hashing, expiry, the sliding window, the throttle's limits and waits) are models/accounts/
sessions.py's and logins.py's; these only read and write rows. Writes join the caller's transaction.
"""

from __future__ import annotations

from models.store.rows import Store, fetch_one, fetch_single


class SessionStore(Store):
    """The session and login-failure rows of one connection; writes join the caller's transaction."""

    SQL_INSERT_SESSION = (
        "INSERT INTO panel_session (id_hash, user_id, csrf_token, created_at, seen_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?)"
    )
    # What a request needs, in one read by primary key: the session and its user.
    SQL_SESSION = (
        "SELECT s.user_id, s.csrf_token, s.seen_at, s.expires_at, u.name, u.role, u.hides_money, "
        "u.is_disabled, u.timezone FROM panel_session AS s JOIN app_user AS u ON u.id = s.user_id "
        "WHERE s.id_hash = ?"
    )
    # Only when the stored time is older than `?`: concurrent requests of one page write once.
    SQL_TOUCH_SESSION = (
        "UPDATE panel_session SET seen_at = ?, expires_at = ? WHERE id_hash = ? AND seen_at < ?"
    )
    SQL_DELETE_SESSION = "DELETE FROM panel_session WHERE id_hash = ?"
    SQL_DELETE_EXPIRED_SESSIONS = "DELETE FROM panel_session WHERE expires_at <= ?"
    SQL_DELETE_USER_SESSIONS = "DELETE FROM panel_session WHERE user_id = ? AND id_hash != ?"

    # One row per failed login: the address (IPv4, or an IPv6 /64), the name as logins.py keys it, and
    # whether that name had logged in from that address before.
    SQL_INSERT_FAILURE = (
        "INSERT INTO login_failure (address, name, is_known_address, failed_at) VALUES (?, ?, ?, ?)"
    )
    SQL_PAIR_FAILURES = (
        "SELECT COUNT(*), MAX(failed_at) FROM login_failure WHERE address = ? AND name = ? AND failed_at >= ?"
    )
    # The `?`-th newest failure since a time (OFFSET counts from 0): the one whose ageing out brings the
    # count under a limit of `?` + 1; no row while the count is under it. Rows are few per address and
    # per name: the limits stop the writes.
    SQL_NTH_ADDRESS_FAILURE = (
        "SELECT failed_at FROM login_failure WHERE address = ? AND failed_at >= ? "
        "ORDER BY failed_at DESC LIMIT 1 OFFSET ?"
    )
    SQL_NTH_UNKNOWN_ADDRESS_FAILURE = (
        "SELECT failed_at FROM login_failure WHERE name = ? AND is_known_address = 0 AND failed_at >= ? "
        "ORDER BY failed_at DESC LIMIT 1 OFFSET ?"
    )
    SQL_DELETE_PAIR_FAILURES = "DELETE FROM login_failure WHERE address = ? AND name = ?"
    SQL_DELETE_OLD_FAILURES = "DELETE FROM login_failure WHERE failed_at < ?"

    # A user's name as the login form sends it (app_user.name ignores case).
    SQL_IS_KNOWN_ADDRESS = (
        "SELECT COUNT(*) FROM login_address AS a JOIN app_user AS u ON u.id = a.user_id "
        "WHERE u.name = ? AND a.address = ? AND a.logged_in_at >= ?"
    )
    SQL_REMEMBER_ADDRESS = (
        "INSERT INTO login_address (user_id, address, logged_in_at) VALUES (?, ?, ?) "
        "ON CONFLICT (user_id, address) DO UPDATE SET logged_in_at = excluded.logged_in_at"
    )
    SQL_FORGET_ADDRESSES = (
        "DELETE FROM login_address WHERE user_id = ? AND (logged_in_at < ? OR address NOT IN "
        "(SELECT address FROM login_address WHERE user_id = ? ORDER BY logged_in_at DESC LIMIT ?))"
    )

    __slots__ = ()

    # -- sessions

    def insert_session(
        self, id_hash: str, user_id: int, csrf_token: str, now_ms: int, expires_at: int
    ) -> None:
        self.conn.execute(
            self.SQL_INSERT_SESSION, (id_hash, user_id, csrf_token, now_ms, now_ms, expires_at)
        ).close()

    def session(self, id_hash: str) -> tuple | None:
        """(user id, csrf token, seen_at, expires_at, name, role, hides_money, is_disabled, timezone), or
        None."""
        return fetch_one(self.conn, self.SQL_SESSION, (id_hash,))

    def touch_session(self, id_hash: str, now_ms: int, expires_at: int, older_than: int) -> None:
        self.conn.execute(self.SQL_TOUCH_SESSION, (now_ms, expires_at, id_hash, older_than)).close()

    def delete_session(self, id_hash: str) -> None:
        self.conn.execute(self.SQL_DELETE_SESSION, (id_hash,)).close()

    def delete_user_sessions(self, user_id: int, keep_hash: str = "") -> None:
        """Every session of the user but `keep_hash`'s."""
        self.conn.execute(self.SQL_DELETE_USER_SESSIONS, (user_id, keep_hash)).close()

    def delete_expired_sessions(self, now_ms: int) -> None:
        self.conn.execute(self.SQL_DELETE_EXPIRED_SESSIONS, (now_ms,)).close()

    # -- failed logins

    def insert_failure(self, address: str, name: str, is_known_address: bool, now_ms: int) -> None:
        self.conn.execute(self.SQL_INSERT_FAILURE, (address, name, int(is_known_address), now_ms)).close()

    def pair_failures(self, address: str, name: str, since_ms: int) -> tuple[int, int | None]:
        """(failures of `name` from `address` at or after `since_ms`, the newest one's time)."""
        count, newest = fetch_single(self.conn, self.SQL_PAIR_FAILURES, (address, name, since_ms))
        return count, newest

    def nth_address_failure(self, address: str, since_ms: int, n: int) -> int | None:
        """The time of the `n`-th newest failure from `address` at or after `since_ms` (any name), or None
        when there are fewer."""
        row = fetch_one(self.conn, self.SQL_NTH_ADDRESS_FAILURE, (address, since_ms, n - 1))
        return row[0] if row else None

    def nth_unknown_address_failure(self, name: str, since_ms: int, n: int) -> int | None:
        """The time of the `n`-th newest failure of `name` from addresses it had never logged in from,
        at or after `since_ms`, or None when there are fewer."""
        row = fetch_one(self.conn, self.SQL_NTH_UNKNOWN_ADDRESS_FAILURE, (name, since_ms, n - 1))
        return row[0] if row else None

    def delete_pair_failures(self, address: str, name: str) -> None:
        self.conn.execute(self.SQL_DELETE_PAIR_FAILURES, (address, name)).close()

    def delete_old_failures(self, before_ms: int) -> None:
        self.conn.execute(self.SQL_DELETE_OLD_FAILURES, (before_ms,)).close()

    # -- the addresses users logged in from

    def is_known_address(self, user_name: str, address: str, since_ms: int) -> bool:
        """Whether user `user_name` logged in from `address` at or after `since_ms` (False for no user)."""
        return bool(fetch_single(self.conn, self.SQL_IS_KNOWN_ADDRESS, (user_name, address, since_ms))[0])

    def remember_address(self, user_id: int, address: str, now_ms: int, keep: int, since_ms: int) -> None:
        """Record a login of the user from `address`; keep its `keep` newest addresses used since
        `since_ms`, forget the rest."""
        self.conn.execute(self.SQL_REMEMBER_ADDRESS, (user_id, address, now_ms)).close()
        self.conn.execute(self.SQL_FORGET_ADDRESSES, (user_id, since_ms, user_id, keep)).close()
