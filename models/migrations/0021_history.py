"""The columnar click history's bookkeeping in the row store (issue 28, docs/analytics.md).

- `history_state`, one row: `position`, the highest click id the DuckDB history
  (DATA_DIR/history/clicks.duckdb) holds and readers may trust; `target`, the highest id the appender
  has decided to copy (its closed watermark), set before it reads a row, so a click mutated while it
  copies is recorded below. Typed BIGINT columns, not `meta` rows: every click mutation compares its id
  with `target` inside its own statement (models/store/history.py).
- `history_change (click_id, seq)`: the clicks mutated after they were copied (an LP click, a cost
  spread, a sub_id set by a postback), each with a number a newer mutation moves on; the appender
  copies them again and forgets exactly the (click_id, seq) pairs it saw.

New tables only: instant on any size.
"""

TABLES = (
    """
CREATE TABLE history_state (
    id {int} NOT NULL PRIMARY KEY CHECK (id = 1),
    position {int} NOT NULL,
    target {int} NOT NULL
)""",
    "INSERT INTO history_state (id, position, target) VALUES (1, 0, 0)",
    """
CREATE TABLE history_change (
    click_id {int} NOT NULL PRIMARY KEY,
    seq {int} NOT NULL
){without_rowid}""",
)


def _apply(db, *, int_type: str, without_rowid: str) -> None:
    for statement in TABLES:
        db.execute_sql(statement.format(int=int_type, without_rowid=without_rowid))


def apply(db):
    _apply(db, int_type="INTEGER", without_rowid=" WITHOUT ROWID")


def apply_postgres(db):
    _apply(db, int_type="BIGINT", without_rowid="")
