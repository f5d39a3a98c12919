"""Accounts: users with roles, campaign ownership and sharing, API keys per user, and the audit log.

Before this, one install key (meta `api_key`) opened the report API and the CLI was the only other
way in. It keeps working, as an admin key with write scope (models/accounts/principal.py). Existing
campaigns get no owner: owned by nobody, only admins see them until one is given an owner or shared.
No user is created here: `lanner run` (and `lanner user add`) make the first admin, so no password
is ever chosen by a migration. Every table is new or gains a NULL column: instant on any size.

The user table is `app_user`: `user` is a reserved word in PostgreSQL, the store's next dialect.
"""

STATEMENTS = [
    # Names are ASCII (models/accounts/users.py checks), so NOCASE folds every one of them.
    """
CREATE TABLE app_user (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'buyer', 'viewer')),
    password_hash TEXT NOT NULL,
    hides_money INTEGER NOT NULL DEFAULT 0,
    is_disabled INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    # A removed user's campaigns go back to nobody (admins only), not away.
    "ALTER TABLE campaign ADD COLUMN owner_id INTEGER REFERENCES app_user (id) ON DELETE SET NULL",
    "CREATE INDEX campaign_owner ON campaign (owner_id) WHERE owner_id IS NOT NULL",
    """
CREATE TABLE campaign_share (
    campaign_id INTEGER NOT NULL REFERENCES campaign (id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    may_edit INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, user_id)
) WITHOUT ROWID""",
    "CREATE INDEX campaign_share_user ON campaign_share (user_id, campaign_id)",
    # Only the key's SHA-256 is kept; `prefix` (its first characters) tells keys apart in a list.
    """
CREATE TABLE api_key (
    id INTEGER NOT NULL PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES app_user (id) ON DELETE CASCADE,
    key_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
    label TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    is_revoked INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX api_key_user ON api_key (user_id)",
    # actor_user_id has no foreign key: the log outlives the users it names (`actor` keeps the name).
    """
CREATE TABLE audit_log (
    id INTEGER NOT NULL PRIMARY KEY,
    created_at INTEGER NOT NULL,
    actor_user_id INTEGER,
    actor TEXT NOT NULL,
    entity TEXT NOT NULL,
    entity_id INTEGER,
    action TEXT NOT NULL,
    old_values TEXT NOT NULL DEFAULT '{}',
    new_values TEXT NOT NULL DEFAULT '{}'
)""",
    "CREATE INDEX audit_log_created_at ON audit_log (created_at)",
    "CREATE INDEX audit_log_entity ON audit_log (entity, entity_id)",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
