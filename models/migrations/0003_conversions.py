"""Conversions: incoming postbacks and their raw log, status maps, outbound postbacks, secrets.

Every statement creates a new table or adds a column with a constant default: light on any size
of database. The postback key and the API key are generated here, so every install has its own
from its first `lanner db migrate` (`lanner postback key rotate` replaces it).
"""

import secrets

STATEMENTS = [
    # One row per conversion: (subid, tid) is the network's identity of it; tid '' when none was sent.
    # The click's campaign, stream, offer and time are copied in so reports need not join on subid.
    """
CREATE TABLE conversion (
    id INTEGER NOT NULL PRIMARY KEY,
    subid TEXT NOT NULL,
    tid TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    original_status TEXT NOT NULL,
    raw_status TEXT NOT NULL DEFAULT '',
    network TEXT NOT NULL DEFAULT '',
    payout REAL NOT NULL DEFAULT 0,
    currency TEXT NOT NULL DEFAULT 'USD',
    cost REAL NOT NULL DEFAULT 0,
    click_id INTEGER NOT NULL,
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER,
    offer_id INTEGER,
    click_created_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (subid, tid)
)""",
    "CREATE INDEX conversion_campaign_click_created_at ON conversion (campaign_id, click_created_at)",
    "CREATE INDEX conversion_created_at ON conversion (created_at)",
    # Every postback as received, with what became of it; parked ones wait here for their click.
    """
CREATE TABLE postback_log (
    id INTEGER NOT NULL PRIMARY KEY,
    received_at INTEGER NOT NULL,
    method TEXT NOT NULL,
    remote_ip TEXT NOT NULL,
    request TEXT NOT NULL,
    subid TEXT NOT NULL DEFAULT '',
    tid TEXT NOT NULL DEFAULT '',
    raw_status TEXT NOT NULL DEFAULT '',
    params TEXT NOT NULL DEFAULT '{}',
    verdict TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    conversion_id INTEGER,
    expires_at INTEGER
)""",
    "CREATE INDEX postback_log_received_at ON postback_log (received_at)",
    "CREATE INDEX postback_log_subid ON postback_log (subid)",
    # Small by construction: only postbacks waiting for their click are in it.
    "CREATE INDEX postback_log_parked ON postback_log (expires_at) WHERE verdict = 'parked'",
    # A network's own status words; network '' applies to every network.
    """
CREATE TABLE status_map (
    network TEXT NOT NULL,
    raw_status TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (network, raw_status)
) WITHOUT ROWID""",
    # Outbound: per campaign and status, where to tell the traffic source about a conversion.
    """
CREATE TABLE postback_target (
    id INTEGER NOT NULL PRIMARY KEY,
    campaign_id INTEGER NOT NULL REFERENCES campaign (id),
    statuses TEXT NOT NULL,
    url TEXT NOT NULL,
    method TEXT NOT NULL DEFAULT 'GET',
    status TEXT NOT NULL DEFAULT 'active',
    created_at INTEGER NOT NULL
)""",
    "CREATE INDEX postback_target_campaign_id ON postback_target (campaign_id)",
    """
CREATE TABLE postback_delivery (
    id INTEGER NOT NULL PRIMARY KEY,
    conversion_id INTEGER NOT NULL REFERENCES conversion (id),
    target_id INTEGER NOT NULL REFERENCES postback_target (id),
    status TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    url TEXT NOT NULL DEFAULT '',
    response_code INTEGER,
    error TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (conversion_id, target_id, status)
)""",
    "CREATE INDEX postback_delivery_due ON postback_delivery (next_attempt_at) WHERE state = 'pending'",
    "ALTER TABLE campaign ADD COLUMN cost_currency TEXT NOT NULL DEFAULT 'USD'",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
    for key in ("postback_key", "api_key"):
        db.execute_sql("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, secrets.token_hex(16)))
