"""Conversions in the columnar history (issue 28 point 1, docs/analytics.md): the row store's side.

- `history_state.conversion_position`: the highest conversion id the DuckDB history holds that readers
  may trust (DuckDB may be ahead of it, never behind); `history_state.conversion_target`: the
  appender's closed watermark of conversion ids, set with the clicks' `target` in one step, before it
  reads a row.
- `history_conversion_change (conversion_id, seq)`: the conversions changed after they were copied
  (a status, a payout, a rate's conversion, an offer moved with its click's LP click, a currency
  relabelled, a delete); the appender copies them again (or deletes its copy) and forgets exactly the
  (conversion_id, seq) pairs it saw.

- `conversion_click_id`, an index on `conversion (click_id)`: a history report reads from the row store
  only the conversions the history does not answer for (past its positions, or queued, or of a click
  past its position or queued), as index ranges and lookups instead of a look at every conversion of
  the range (models/store/reports.py `UNANSWERED_CONVERSION`).

Two columns with a constant default and a new table are instant on any size; the index is built over
the conversions (few beside the clicks: 0.44 s for 200,000 on the loaded two-core box). Position 0:
the next append copies every conversion the row store holds.
"""


def _apply(db, *, int_type: str, without_rowid: str) -> None:
    for column in ("conversion_position", "conversion_target"):
        db.execute_sql(f"ALTER TABLE history_state ADD COLUMN {column} {int_type} NOT NULL DEFAULT 0")
    db.execute_sql(
        "CREATE TABLE history_conversion_change (\n"
        f"    conversion_id {int_type} NOT NULL PRIMARY KEY,\n"
        f"    seq {int_type} NOT NULL\n"
        f"){without_rowid}"
    )
    db.execute_sql("CREATE INDEX conversion_click_id ON conversion (click_id)")


def apply(db):
    _apply(db, int_type="INTEGER", without_rowid=" WITHOUT ROWID")


def apply_postgres(db):
    _apply(db, int_type="BIGINT", without_rowid="")
