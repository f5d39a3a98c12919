"""Status changes per network (issue 29): which changes of a conversion's status a network's postbacks
may make, how it sends rebills, and each conversion's status before its last change.

- `network.status_changes`: `forward` (lead → sale | rejected | trash, sale → rejected: the rules so
  far) or `any` (a network that corrects itself either way: rejected → approved, approved → rejected or
  back to pending, pending → anything).
- `network.rebills`: `own_tid` (a rebill comes as a `rebill` status word with a tid of its own: the
  rules so far) or `repeat_sale` (the network sends each rebill as another approved postback with a new
  tid: a click's second sale is recorded as a rebill, a conversion of its own).
- `conversion.previous_status`: the status the last change moved it from ('' while never changed),
  shown in the conversion log as before → after.

Columns added with constant defaults: instant on any size, on both backends.
"""

STATEMENTS = (
    "ALTER TABLE network ADD COLUMN status_changes TEXT NOT NULL DEFAULT 'forward'",
    "ALTER TABLE network ADD COLUMN rebills TEXT NOT NULL DEFAULT 'own_tid'",
    "ALTER TABLE conversion ADD COLUMN previous_status TEXT NOT NULL DEFAULT ''",
)


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)


def apply_postgres(db):
    apply(db)
