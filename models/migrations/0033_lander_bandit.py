"""Smart rotation of a stream's landers (issue 31): `stream.lander_rotation` (weight, bandit_cr: the
lander's click-through to the offer, bandit_epc: its earnings per click) and `bandit_lander_share`, the
landers' twin of `bandit_share` (migration 0026), replaced by the same minutely refresh and reloaded by
web workers on the same `bandit_version`. A column with a constant default and a new table: instant on
any size, on both backends.
"""

COLUMNS = """
    stream_id {int} NOT NULL REFERENCES stream (id),
    lander_id {int} NOT NULL REFERENCES lander (id),
    clicks {int} NOT NULL DEFAULT 0,
    conversions {int} NOT NULL DEFAULT 0,
    revenue {real} NOT NULL DEFAULT 0,
    best_probability {real} NOT NULL DEFAULT 0,
    share {real} NOT NULL DEFAULT 0,
    updated_at {int} NOT NULL,
    PRIMARY KEY (stream_id, lander_id)"""


def _apply(db, *, int_type: str, real_type: str) -> None:
    db.execute_sql("ALTER TABLE stream ADD COLUMN lander_rotation TEXT NOT NULL DEFAULT 'weight'")
    db.execute_sql(f"CREATE TABLE bandit_lander_share ({COLUMNS.format(int=int_type, real=real_type)}\n)")


def apply(db):
    _apply(db, int_type="INTEGER", real_type="REAL")


def apply_postgres(db):
    _apply(db, int_type="BIGINT", real_type="DOUBLE PRECISION")
