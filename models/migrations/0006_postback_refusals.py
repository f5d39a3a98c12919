"""Refused postbacks as bounded counters (models/conversions/refusals.py), and the postback key masked in the
log.

Before this release every wrong-key postback was a postback_log row, and a key sent in a POST body
was logged as received. The counters' table is new and empty; the current key is masked wherever
the log holds it (keys rotated away no longer open anything). The masking reads the whole log
once (about 1 s per 500,000 rows, measured) and rewrites only the rows that hold the key; from this
release on the log is bounded by LANNER_POSTBACK_LOG_DAYS.
"""

STATEMENTS = [
    """
CREATE TABLE postback_refusal (
    day INTEGER NOT NULL,
    remote_ip TEXT NOT NULL,
    refusals INTEGER NOT NULL,
    first_at INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    sample_hour INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    sample TEXT NOT NULL,
    PRIMARY KEY (day, remote_ip)
) WITHOUT ROWID""",
]
MASK = "…"


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)
    row = db.execute_sql("SELECT value FROM meta WHERE key = 'postback_key'").fetchone()
    if row and row[0]:
        db.execute_sql(
            "UPDATE postback_log SET request = replace(request, ?1, ?2) WHERE instr(request, ?1) > 0",
            (row[0], MASK),
        )
