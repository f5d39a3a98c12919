"""Smart rotation's state (`bandit_share`): per stream in a bandit rotation (`stream.offer_rotation`
bandit_cr or bandit_epc, a value of the existing column), per offer, the numbers of the last refresh
(clicks, conversions and revenue over its window), the offer's probability of being the best and the
share of clicks it gets (models/routing/bandit.py). The minutely refresh replaces the rows and moves
the `bandit_version` meta key, which web workers read to reload them. A new table only: instant on any
size.
"""

COLUMNS = """
    stream_id {int} NOT NULL REFERENCES stream (id),
    offer_id {int} NOT NULL REFERENCES offer (id),
    clicks {int} NOT NULL DEFAULT 0,
    conversions {int} NOT NULL DEFAULT 0,
    revenue {real} NOT NULL DEFAULT 0,
    best_probability {real} NOT NULL DEFAULT 0,
    share {real} NOT NULL DEFAULT 0,
    updated_at {int} NOT NULL,
    PRIMARY KEY (stream_id, offer_id)"""


def _apply(db, *, int_type: str, real_type: str) -> None:
    db.execute_sql(f"CREATE TABLE bandit_share ({COLUMNS.format(int=int_type, real=real_type)}\n)")


def apply(db):
    _apply(db, int_type="INTEGER", real_type="REAL")


def apply_postgres(db):
    _apply(db, int_type="BIGINT", real_type="DOUBLE PRECISION")
