"""A timezone per user, and when each last logged in (the panel's users page shows it).

`timezone` is an IANA name the user's periods, charts and times are in; '' is the report default
(UTC), so existing users see what they saw before. `last_login_at` (Unix ms) is set by a panel
login and stays NULL for a user who never logged in. Both are columns added with a constant
default: instant on any size.
"""

STATEMENTS = [
    "ALTER TABLE app_user ADD COLUMN timezone TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE app_user ADD COLUMN last_login_at INTEGER",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
