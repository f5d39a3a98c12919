"""Rules that act at the traffic source (issue 31): a rule action's `state` and the source's `answer`.

- `rule_action.state`: done (what it did stands, once per rule, campaign and target as before), failed
  (the source refused: the next run tries again, the row's answer says why) or skipped (nothing to do it
  through: no connection, no mapping; the next run looks again). Only a done action is never repeated.
- `rule_action.answer`: what the source answered, or why the action was not done.

Two columns with constant defaults: instant on any size, on both backends.
"""

STATEMENTS = (
    "ALTER TABLE rule_action ADD COLUMN state TEXT NOT NULL DEFAULT 'done'",
    "ALTER TABLE rule_action ADD COLUMN answer TEXT NOT NULL DEFAULT ''",
)


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)


def apply_postgres(db):
    apply(db)
