"""Per-node partial rows (issue 33, point 2): `node` at the end of the key of the six rollup tables
and of `click_counter`.

Every node's flusher added onto the same rows (a campaign's hour, a stream's day), so the flushers
of one campaign took turns on those rows' locks. Now each flusher adds onto its own partial of a key
(its node's number, models/clicks/node.py partial_number; 0 for `main`, the single box, and for every
writer that is not a flusher) and every reader sums the partials. The rows already stored become
partial 0: nothing to recount.

PostgreSQL: a column with a constant default (instant) and the primary key built again over it (an
index build per table, under the table's lock). SQLite cannot change a primary key: each table is
built again with its rows copied, its indexes after (WITHOUT ROWID, as before). On one box the node
is always 0, so the rows, the reports and the flusher's work are what they were.
"""

DETAIL_KEY = (
    "period",
    "campaign_id",
    "stream_id",
    "offer_id",
    "source",
    "country",
    "device_type",
    "os",
    "browser",
    "language",
)
CAMPAIGN_KEY = ("period", "campaign_id", "stream_id", "offer_id")
# table -> its key before this migration (`node` goes after it).
KEYS = {
    "click_counter": ("scope", "ref_id", "day"),
    "rollup_hour": DETAIL_KEY,
    "rollup_day": DETAIL_KEY,
    "rollup_campaign_hour": CAMPAIGN_KEY,
    "rollup_campaign_day": CAMPAIGN_KEY,
    "rollup_campaign_country_hour": (*CAMPAIGN_KEY, "country"),
    "rollup_campaign_country_day": (*CAMPAIGN_KEY, "country"),
}


def _sqlite_rebuild(db, table: str, key: tuple[str, ...]) -> None:
    # (cid, name, type, notnull, default, pk) per column, in their order.
    columns = db.execute_sql(f"PRAGMA table_info({table})").fetchall()
    indexes = db.execute_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,)
    ).fetchall()
    # `node` last, as PostgreSQL's ADD COLUMN puts it (a copy between the two keeps column order).
    # Every NOT NULL column before it needs a default: SQLite 3.40's integrity_check reads one without,
    # declared before a key column, as NULL in a WITHOUT ROWID table (a false alarm that
    # tests/test_crash_loop.py's check raised on click_counter.clicks); the writers always set it.
    definitions = [
        f"{name} {kind}{' NOT NULL' if notnull else ''}"
        + (f" DEFAULT {default}" if default is not None else (" DEFAULT 0" if notnull and not pk else ""))
        for _, name, kind, notnull, default, pk in columns
    ]
    names = ", ".join(name for _, name, *_ in columns)
    db.execute_sql(
        f"CREATE TABLE {table}_partial (\n    "
        + ",\n    ".join([*definitions, "node INTEGER NOT NULL DEFAULT 0"])
        + f",\n    PRIMARY KEY ({', '.join((*key, 'node'))})\n) WITHOUT ROWID"
    )
    db.execute_sql(f"INSERT INTO {table}_partial ({names}) SELECT {names} FROM {table}")
    db.execute_sql(f"DROP TABLE {table}")
    db.execute_sql(f"ALTER TABLE {table}_partial RENAME TO {table}")
    for (sql,) in indexes:
        db.execute_sql(sql)


def apply(db):
    for table, key in KEYS.items():
        _sqlite_rebuild(db, table, key)


def apply_postgres(db):
    db.execute_sql("ALTER TABLE click_counter ALTER COLUMN clicks SET DEFAULT 0")  # As SQLite's (above).
    for table, key in KEYS.items():
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN node BIGINT NOT NULL DEFAULT 0")
        db.execute_sql(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
        db.execute_sql(f"ALTER TABLE {table} ADD PRIMARY KEY ({', '.join((*key, 'node'))})")
