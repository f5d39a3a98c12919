"""The panel's sessions and failed logins: every statement on panel_session and login_failure.

The rules (id hashing, expiry, the sliding window, the throttle's limits) are models/accounts/
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

    SQL_INSERT_FAILURE = "INSERT INTO login_failure (subject, failed_at) VALUES (?, ?)"
    SQL_FAILURES_SINCE = (
        "SELECT COUNT(*), MIN(failed_at) FROM login_failure WHERE subject = ? AND failed_at >= ?"
    )
    SQL_DELETE_FAILURES = "DELETE FROM login_failure WHERE subject = ?"
    SQL_DELETE_OLD_FAILURES = "DELETE FROM login_failure WHERE failed_at < ?"

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

    def insert_failure(self, subject: str, now_ms: int) -> None:
        self.conn.execute(self.SQL_INSERT_FAILURE, (subject, now_ms)).close()

    def failures_since(self, subject: str, since_ms: int) -> tuple[int, int | None]:
        """(failures of `subject` at or after `since_ms`, the oldest one's time)."""
        count, oldest = fetch_single(self.conn, self.SQL_FAILURES_SINCE, (subject, since_ms))
        return count, oldest

    def delete_failures(self, subject: str) -> None:
        self.conn.execute(self.SQL_DELETE_FAILURES, (subject,)).close()

    def delete_old_failures(self, before_ms: int) -> None:
        self.conn.execute(self.SQL_DELETE_OLD_FAILURES, (before_ms,)).close()
