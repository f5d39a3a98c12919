"""The visitor key: one 64-bit integer per click (IP + UA hash) and a covering uniqueness index on it.

The old visitor index, (ip, ua_hash, created_at), made every uniqueness probe of a returning
visitor fetch each of up to 64 recent rows from the table for its campaign, stream and offer; the
new one, (visitor_key, created_at, campaign_id, stream_id, offer_id), answers the probe from the
index alone and keys on 8 bytes instead of the IP text and the hash.

Light here: the column is added (NULL on stored clicks). On a database with clicks the heavy work
is left to three deferred steps (DEFERRED_STEPS below, run by models/migrations/deferred.py), in order:

- `visitor_key_backfill`: fills the key of the stored clicks in short chunks;
- `visitor_key_index`: builds the new index and switches the web workers' probes to it (meta
  `visitor_probe` = 'key'; they re-read it within a second, on the config_version bump);
- `click_visitor_drop`: drops the old index once no worker can still be probing it.

Until the switch, workers probe the old index, which covers every click whether its key is filled
or not, so uniqueness stays exact while the backfill runs. A new database (no clicks) gets the
final state at once.
"""

from models.migrations import deferred
from models.store.maintenance import MaintenanceStore
from models.store.meta import MetaStore

STEPS = ("visitor_key_backfill", "visitor_key_index", "click_visitor_drop")
DELAYED_STEPS = ("click_visitor_drop",)  # Waits out DROP_GRACE_MS after the switch.
# Web workers re-read the probe mode within a second of the switch; a worker of the previous
# release is replaced by the reload that follows `lanner db migrate`. Ten minutes covers both.
DROP_GRACE_MS = 600_000
INDEX_BUILD_CACHE_MB = 64  # Freed when the build ends.
SQL_FILL_VISITOR_KEYS = (
    "UPDATE click SET visitor_key = lanner_visitor_key(ip, ua_hash) "
    "WHERE id > ? AND id <= ? AND visitor_key IS NULL"
)
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


def fill_visitor_keys(conn, step, now: int) -> tuple[int, int]:
    """One chunk of `visitor_key_backfill`."""
    end = min(step.position + deferred.CHUNK_IDS, step.target)
    conn.execute(SQL_FILL_VISITOR_KEYS, (step.position, end)).close()
    return end, end - step.position  # Units are ids, as apply counted them.


def build_visitor_key_index(conn, step, now: int) -> tuple[int, int]:
    """`visitor_key_index`: build the covering index and switch the web workers' probes to it, in one
    transaction.

    The write lock is held for the build (seconds on millions of clicks): clicks wait in the
    spool meanwhile and visitors are not kept waiting, since web workers only read.
    """
    # Clicks a flusher of the previous release landed after the migration have no key yet.
    conn.execute(SQL_FILL_VISITOR_KEYS, (step.target, 2**63 - 1)).close()
    with MaintenanceStore(conn).large_cache(INDEX_BUILD_CACHE_MB):  # The new keys sort in the page cache.
        conn.execute(NEW_INDEX).close()
    meta = MetaStore(conn)
    meta.set("visitor_probe", "key")
    meta.put("visitor_probe_switched_at", str(now))
    meta.bump_config_version()
    return step.target, 1


def drop_old_visitor_index(conn, step, now: int) -> tuple[int, int] | None:
    """`click_visitor_drop`: drop (ip, ua_hash, created_at) once every web worker probes the new
    index; None: not yet."""
    switched = MetaStore(conn).get("visitor_probe_switched_at")
    if switched is None or now < int(switched) + DROP_GRACE_MS:
        return None
    conn.execute("DROP INDEX IF EXISTS click_visitor").close()
    return step.target, 1


DEFERRED_STEPS = dict(
    zip(STEPS, (fill_visitor_keys, build_visitor_key_index, drop_old_visitor_index), strict=True)
)
