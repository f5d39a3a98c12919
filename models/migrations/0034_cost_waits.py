"""Waits (issue 30): costs waiting for an exchange rate, and spend connections waiting out a platform's
Retry-After.

A click whose cost is in a currency with no rate into
the report currency keeps that cost here, as received (amount and currency), while `click.cost` holds 0
until a rate for the currency arrives; then the cost is converted at the click day's rate, written to
the click (the rollups and the columnar history move with it) and its row here goes
(models/reporting/costs.py, models/reporting/currency.py).

Small by construction: only the clicks waiting for a rate are in it. A click deleted (pruned, forgotten)
takes its row with it.

`spend_connection.retry_after_at` (Unix ms, NULL for none): a platform that answered a sync 429 (or 503)
with Retry-After is not asked again by the periodic sync before then (models/reporting/spend/).

A new table and a nullable column: instant on any size, on both backends.
"""

TABLES = (
    """
CREATE TABLE unrated_cost (
    click_id {int} NOT NULL PRIMARY KEY REFERENCES click (id) ON DELETE CASCADE,
    created_at {int} NOT NULL,
    currency TEXT NOT NULL,
    amount {real} NOT NULL
)""",
    "CREATE INDEX unrated_cost_currency ON unrated_cost (currency, created_at)",
    "ALTER TABLE spend_connection ADD COLUMN retry_after_at {int}",
)


def _apply(db, *, int_type: str, real_type: str) -> None:
    for statement in TABLES:
        db.execute_sql(statement.format(int=int_type, real=real_type))


def apply(db):
    _apply(db, int_type="INTEGER", real_type="REAL")


def apply_postgres(db):
    _apply(db, int_type="BIGINT", real_type="DOUBLE PRECISION")
