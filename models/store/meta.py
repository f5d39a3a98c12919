"""The `meta` table: the install's switches and secrets as key/value rows, read and written here only.

Keys (created by the migrations; a key a migration has not made yet reads as None):
- `config_version`: moved on by every change web workers route by (a campaign, stream, offer or
  map saved, a migration switching the visitor probe); a worker reloads when it sees a new value.
- `visitor_probe`: 'pair' until migration 0005's backfill and index are done, then 'key';
  `visitor_probe_switched_at`: when it switched (Unix ms).
- `rollup_conversions`: 'backfill' until the deferred step has put every conversion in the
  rollups, then 'live' (conversions recorded before that are left to the backfill).
- `report_currency`: the currency stored report amounts are in.
- `bandit_version`: moved by each refresh of smart rotation's shares (models/reporting/bandits.py); a
  web worker reloads them when it sees a new value. Missing until the first refresh.
- `pruned_before`: Unix ms before which `lanner prune` deleted raw clicks; it only moves forward.
- `backup_history`: in a backup copy only, "<position> <clicks>" of the history file taken with it
  (models/store/files.py writes it, a restore reads and forgets it).
- `postback_key`, `api_key`: the secrets (models/conversions/postbacks.py reads and rotates them).

Statements are class constants over the raw connection, like the hot path's: a web worker asks for
config_version on every unknown alias (~10 µs).
"""

from __future__ import annotations

from models.store.rows import Store, fetch_one


class MetaStore(Store):
    """The `meta` rows of one connection; writes join the caller's transaction."""

    SQL_GET = "SELECT value FROM meta WHERE key = ?"
    SQL_SET = "UPDATE meta SET value = ? WHERE key = ?"
    SQL_PUT = (
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
    SQL_FORGET = "DELETE FROM meta WHERE key = ?"
    SQL_CONFIG_VERSION = "SELECT value FROM meta WHERE key = 'config_version'"
    SQL_ROLLUPS_LIVE = "SELECT value = 'live' FROM meta WHERE key = 'rollup_conversions'"

    __slots__ = ()

    def get(self, key: str) -> str | None:
        row = fetch_one(self.conn, self.SQL_GET, (key,))
        return row[0] if row else None

    def set(self, key: str, value: str) -> None:
        """Change an existing key (one a migration created); a missing key stays missing."""
        self.conn.execute(self.SQL_SET, (value, key)).close()

    def put(self, key: str, value: str) -> None:
        """Create or change a key."""
        self.conn.execute(self.SQL_PUT, (key, value)).close()

    def forget(self, key: str) -> None:
        self.conn.execute(self.SQL_FORGET, (key,)).close()

    def config_version(self) -> str:
        row = fetch_one(self.conn, self.SQL_CONFIG_VERSION)
        return row[0] if row else ""

    def bump_config_version(self) -> None:
        """Tell every web worker to reload its configuration: inside the change's own transaction."""
        self.conn.execute(self.SQL_BUMP_CONFIG_VERSION).close()

    def bandit_version(self) -> str | None:
        return self.get("bandit_version")

    def move_bandit_version(self, version: str) -> None:
        """Tell every web worker to reload the bandit shares: inside the refresh's own transaction."""
        self.put("bandit_version", version)

    def rollups_live(self) -> bool:
        """Whether a conversion recorded now must move the rollups itself (the backfill is done)."""
        row = fetch_one(self.conn, self.SQL_ROLLUPS_LIVE)
        return bool(row and row[0])

    def pruned_before(self) -> int | None:
        value = self.get("pruned_before")
        return int(value) if value is not None else None

    def move_pruned_before(self, cutoff_ms: int) -> None:
        """Record a prune's cutoff; an earlier one never moves it back."""
        self.conn.execute(self.SQL_MOVE_PRUNED_BEFORE, (cutoff_ms,)).close()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).
    SQL_BUMP_CONFIG_VERSION: str
    SQL_MOVE_PRUNED_BEFORE: str
