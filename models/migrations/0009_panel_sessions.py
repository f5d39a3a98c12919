"""The web panel's sessions and failed logins (routes/panel/, models/accounts/sessions.py, logins.py).

A session row is keyed by the SHA-256 of its id: the cookie's value is never stored, so a copy of
the database opens no session. Failed logins are kept here, not in the admin worker's memory: that
worker exits when idle and is recycled, and a throttle that forgets on every restart throttles
nothing. Both tables are new: instant on any size.
"""

STATEMENTS = [
    """
CREATE TABLE panel_session (
    id_hash TEXT NOT NULL PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    seen_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID""",
    "CREATE INDEX panel_session_user ON panel_session (user_id)",
    "CREATE INDEX panel_session_expires_at ON panel_session (expires_at)",
    # `subject` is 'ip:<address>' or 'user:<lower-cased name>'; one row per failure, swept as it ages.
    """
CREATE TABLE login_failure (
    id INTEGER NOT NULL PRIMARY KEY,
    subject TEXT NOT NULL,
    failed_at INTEGER NOT NULL
)""",
    "CREATE INDEX login_failure_subject ON login_failure (subject, failed_at)",
    "CREATE INDEX login_failure_failed_at ON login_failure (failed_at)",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
