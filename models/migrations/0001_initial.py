"""The click path's schema: campaigns, streams, offers, clicks, spool position, metadata."""

SUB_ID_COLUMNS = ",\n".join(f"    sub_id_{n} TEXT NOT NULL DEFAULT ''" for n in range(1, 31))

STATEMENTS = [
    """
CREATE TABLE campaign (
    id INTEGER NOT NULL PRIMARY KEY,
    alias TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    rotation TEXT NOT NULL DEFAULT 'position',
    uniqueness_hours REAL NOT NULL DEFAULT 24,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    cost_model TEXT NOT NULL DEFAULT 'cpc',
    cost_value REAL NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    """
CREATE TABLE offer (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    payout REAL NOT NULL DEFAULT 0,
    currency TEXT NOT NULL DEFAULT 'USD',
    daily_cap INTEGER,
    total_cap INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    """
CREATE TABLE stream (
    id INTEGER NOT NULL PRIMARY KEY,
    campaign_id INTEGER NOT NULL REFERENCES campaign (id),
    name TEXT NOT NULL DEFAULT '',
    type TEXT NOT NULL DEFAULT 'regular',
    position INTEGER NOT NULL DEFAULT 1,
    weight INTEGER NOT NULL DEFAULT 100,
    action TEXT NOT NULL DEFAULT 'offers',
    action_payload TEXT NOT NULL DEFAULT '',
    filters TEXT NOT NULL DEFAULT '[]',
    filter_mode TEXT NOT NULL DEFAULT 'and',
    status TEXT NOT NULL DEFAULT 'active',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    "CREATE INDEX stream_campaign_id ON stream (campaign_id)",
    """
CREATE TABLE stream_offer (
    id INTEGER NOT NULL PRIMARY KEY,
    stream_id INTEGER NOT NULL REFERENCES stream (id),
    offer_id INTEGER NOT NULL REFERENCES offer (id),
    weight INTEGER NOT NULL DEFAULT 100,
    status TEXT NOT NULL DEFAULT 'active'
)""",
    "CREATE UNIQUE INDEX stream_offer_stream_id_offer_id ON stream_offer (stream_id, offer_id)",
    f"""
CREATE TABLE click (
    id INTEGER NOT NULL PRIMARY KEY,
    subid TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER,
    offer_id INTEGER,
    ip TEXT NOT NULL,
    user_agent TEXT NOT NULL,
    ua_hash INTEGER NOT NULL,
    referrer TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    external_id TEXT NOT NULL DEFAULT '',
    cost REAL NOT NULL DEFAULT 0,
    is_unique_global INTEGER NOT NULL DEFAULT 0,
    is_unique_campaign INTEGER NOT NULL DEFAULT 0,
    is_unique_stream INTEGER NOT NULL DEFAULT 0,
    is_bot INTEGER NOT NULL DEFAULT 0,
{SUB_ID_COLUMNS}
)""",
    # The uniqueness probes: visitor = IP + UA hash, bounded by time.
    "CREATE INDEX click_visitor ON click (ip, ua_hash, created_at)",
    # Reports and click logs per campaign over a time range.
    "CREATE INDEX click_campaign_created_at ON click (campaign_id, created_at)",
    """
CREATE TABLE spool_position (
    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    segment INTEGER NOT NULL,
    byte_offset INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
)""",
    "INSERT INTO spool_position (id, segment, byte_offset, updated_at) VALUES (1, 1, 0, 0)",
    "CREATE TABLE meta (key TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO meta (key, value) VALUES ('config_version', '1')",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
