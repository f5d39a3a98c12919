"""Users, campaign shares, API keys and the audit log (migration 0008), as Peewee models.

Every statement on them is models/store/accounts.py's and audit.py's; these models name the
columns for the schema guard (tests/test_docs.py) and for Peewee readers.
"""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, CompositeKey, IntegerField, TextField

from models.tables.base import BaseModel


class User(BaseModel):
    id = AutoField()
    name = TextField(unique=True)  # Case-insensitive (SQLite COLLATE NOCASE, PostgreSQL lanner_nocase).
    role = TextField()  # admin, buyer, viewer
    password_hash = TextField()  # argon2id, in its PHC string form.
    hides_money = IntegerField(default=0)  # Cost, revenue, profit and ROI hidden from this user.
    is_disabled = IntegerField(default=0)
    created_at = BigIntegerField()
    updated_at = BigIntegerField()
    timezone = TextField(default="")  # IANA name of the user's periods and times; '' is UTC (0010).
    last_login_at = BigIntegerField(null=True)  # The last panel login, Unix ms.

    class Meta:
        table_name = "app_user"  # `user` is reserved in PostgreSQL.


class CampaignShare(BaseModel):
    campaign_id = IntegerField()
    user_id = IntegerField()
    may_edit = IntegerField(default=0)
    created_at = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("campaign_id", "user_id")


class ApiKey(BaseModel):
    id = AutoField()
    user_id = IntegerField()
    key_hash = TextField(unique=True)  # SHA-256 hex of the key; the key itself is never stored.
    prefix = TextField()
    scope = TextField()  # read, write
    label = TextField(default="")
    created_at = BigIntegerField()
    last_used_at = BigIntegerField(null=True)  # Moved at most once a minute.
    is_revoked = IntegerField(default=0)


class AuditEntry(BaseModel):
    id = AutoField()
    created_at = BigIntegerField()
    actor_user_id = IntegerField(null=True)
    actor = TextField()  # The user's name, or `cli` / `install key`.
    entity = TextField()  # campaign, stream, offer, user, api_key
    entity_id = IntegerField(null=True)
    action = TextField()  # create, update, archive, remove, share, ...
    old_values = TextField(default="{}")  # JSON of the changed fields only, before ...
    new_values = TextField(default="{}")  # ... and after.

    class Meta:
        table_name = "audit_log"
