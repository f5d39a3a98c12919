"""The visitor key: one 64-bit integer per click (IP + UA hash) and a covering uniqueness index on it.

The old visitor index, (ip, ua_hash, created_at), made every uniqueness probe of a returning
visitor fetch each of up to 64 recent rows from the table for its campaign, stream and offer; the
new one, (visitor_key, created_at, campaign_id, stream_id, offer_id), answers the probe from the
index alone and keys on 8 bytes instead of the IP text and the hash.

Light here: the column is added (NULL on stored clicks). On a database with clicks the heavy work
is left to three deferred steps (models/migrations/deferred.py), in order:

- `visitor_key_backfill`: fills the key of the stored clicks in short chunks;
- `visitor_key_index`: builds the new index and switches the web workers' probes to it (meta
  `visitor_probe` = 'key'; they re-read it within a second, on the config_version bump);
- `click_visitor_drop`: drops the old index once no worker can still be probing it.

Until the switch, workers probe the old index, which covers every click whether its key is filled
or not, so uniqueness stays exact while the backfill runs. A new database (no clicks) gets the
final state at once.
"""

STEPS = ("visitor_key_backfill", "visitor_key_index", "click_visitor_drop")
DELAYED_STEPS = (
    "click_visitor_drop",
)  # Waits out models.migrations.deferred.DROP_GRACE_MS after the switch.
NEW_INDEX = (
    "CREATE INDEX IF NOT EXISTS click_visitor_key ON click (visitor_key, created_at, campaign_id, stream_id, "
    "offer_id)"
)


def apply(db):
    db.execute_sql("ALTER TABLE click ADD COLUMN visitor_key INTEGER")
    if db.execute_sql("SELECT EXISTS (SELECT 1 FROM click)").fetchone()[0]:
        db.execute_sql("INSERT INTO meta (key, value) VALUES ('visitor_probe', 'ip_ua')")
        # The clicks stored so far (id <= target) are the backfill's; the flusher of this release
        # sets the key of every click it lands.
        # Units are click ids (no COUNT(*) over millions of rows in this synchronous step).
        for name in STEPS:
            db.execute_sql(
                "INSERT INTO deferred_step (name, target, total_units, created_at) "
                "SELECT ?, MAX(id), CASE WHEN ? THEN MAX(id) ELSE 1 END, "
                "CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM click",
                (name, name == "visitor_key_backfill"),
            )
        return
    db.execute_sql(NEW_INDEX)
    db.execute_sql("DROP INDEX click_visitor")
    db.execute_sql("INSERT INTO meta (key, value) VALUES ('visitor_probe', 'key')")
