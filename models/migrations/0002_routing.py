"""Routing: stream filters' inputs on the click, stream/offer caps and their exact counters, actions.

Every ADD COLUMN has a constant default, which SQLite applies without rewriting the table, so this
step is light even on millions of clicks. The counter backfill scans clicks once, grouped by UTC
day (every campaign and offer was on UTC before this migration: the timezone was not settable).
"""

CLICK_TEXT_COLUMNS = (
    "country",
    "region",
    "city",
    "device_type",
    "os",
    "browser",
    "language",
    "keyword",
    "route",
)

STATEMENTS = [
    *(f"ALTER TABLE click ADD COLUMN {column} TEXT NOT NULL DEFAULT ''" for column in CLICK_TEXT_COLUMNS),
    "ALTER TABLE campaign ADD COLUMN bind_visitor INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE campaign ADD COLUMN default_action TEXT NOT NULL DEFAULT 'not_found'",
    "ALTER TABLE campaign ADD COLUMN default_payload TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE stream ADD COLUMN daily_cap INTEGER",
    "ALTER TABLE stream ADD COLUMN total_cap INTEGER",
    "ALTER TABLE stream ADD COLUMN offer_rotation TEXT NOT NULL DEFAULT 'weight'",
    "ALTER TABLE stream ADD COLUMN redirect_type TEXT NOT NULL DEFAULT 'http'",
    "ALTER TABLE stream ADD COLUMN fallback_offer_id INTEGER REFERENCES offer (id)",
    "ALTER TABLE offer ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC'",
    # Clicks per stream and per offer per local day (YYYYMMDD in the campaign's / offer's timezone),
    # kept by the spool flusher in the same transaction as the clicks and the spool position, so a
    # worker that reads both in one snapshot and then replays the journal counts exactly.
    """
CREATE TABLE click_counter (
    scope TEXT NOT NULL,
    ref_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    clicks INTEGER NOT NULL,
    PRIMARY KEY (scope, ref_id, day)
) WITHOUT ROWID""",
    """
INSERT INTO click_counter (scope, ref_id, day, clicks)
SELECT 'stream', stream_id, CAST(strftime('%Y%m%d', created_at / 1000, 'unixepoch') AS INTEGER), COUNT(*)
FROM click WHERE stream_id IS NOT NULL GROUP BY 2, 3""",
    """
INSERT INTO click_counter (scope, ref_id, day, clicks)
SELECT 'offer', offer_id, CAST(strftime('%Y%m%d', created_at / 1000, 'unixepoch') AS INTEGER), COUNT(*)
FROM click WHERE offer_id IS NOT NULL GROUP BY 2, 3""",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
