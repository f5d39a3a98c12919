"""A Click API token per campaign (`campaign.token`): what a buyer's own server or lander sends to
`/click_api/v3` (routes/clickapi.py) to run the campaign server-side, as Keitaro's campaign token is.

Existing campaigns get a random token here; new ones get theirs when created (models/tables/campaign.py
`new_token`), and `lanner campaign update ALIAS --new-token` rotates one. The column is nullable (a
campaign written by raw SQL without one simply has no Click API) and unique.
"""

import secrets

INDEX = "CREATE UNIQUE INDEX campaign_token ON campaign (token)"


def _apply(db) -> None:
    db.execute_sql("ALTER TABLE campaign ADD COLUMN token TEXT")
    cursor = db.execute_sql("SELECT id FROM campaign ORDER BY id")
    ids = [row[0] for row in cursor.fetchall()]
    cursor.close()
    update = f"UPDATE campaign SET token = {db.param} WHERE id = {db.param}"
    for campaign_id in ids:  # The shape of models/tables/campaign.py new_token: 32 hex digits.
        db.execute_sql(update, (secrets.token_hex(16), campaign_id)).close()
    db.execute_sql(INDEX)


def apply(db):
    _apply(db)


def apply_postgres(db):
    _apply(db)
