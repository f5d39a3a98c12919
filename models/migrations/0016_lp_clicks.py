"""The click's domain, and the lander step in the rollups.

`click.domain`: the host the click came in on (the request's Host, lowercased, without its port),
which the domains objects read. `lp_views` (clicks sent to a lander) and `lp_clicks` (those whose
lander's link to the offer was followed, models/clicks/tracker.py `lp_click`) on every rollup table,
so reports keep LP views, LP clicks and LP CTR exact without reading raw clicks. Every column has a
constant default: instant on any size (no click before 0015 was sent to a lander, so 0 is exact).
"""

ROLLUP_TABLES = (
    "rollup_hour",
    "rollup_day",
    "rollup_campaign_hour",
    "rollup_campaign_day",
    "rollup_campaign_country_hour",
    "rollup_campaign_country_day",
)

STATEMENTS = (
    "ALTER TABLE click ADD COLUMN domain TEXT NOT NULL DEFAULT ''",
    *(
        f"ALTER TABLE {table} ADD COLUMN {metric} {{int}} NOT NULL DEFAULT 0"
        for table in ROLLUP_TABLES
        for metric in ("lp_views", "lp_clicks")
    ),
)


def _apply(db, *, int_type: str) -> None:
    for statement in STATEMENTS:
        db.execute_sql(statement.format(int=int_type))


def apply(db):
    _apply(db, int_type="INTEGER")


def apply_postgres(db):
    _apply(db, int_type="BIGINT")
