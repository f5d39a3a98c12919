"""A PostgreSQL database as a whole, for cluster mode's `lanner backup` and `lanner restore`
(models/ops/pgbackup.py decides when and where): a pg_dump of one exported snapshot, a pg_restore, and
the rows a restore reads and writes around them (the database's other sessions, its tables, every
node's spool position, the columnar history's facts).

pg_dump and pg_restore are Debian's postgresql-client binaries (/usr/bin's wrapper picks the version
that matches the server). The URL's password reaches them in PGPASSWORD, never on a command line that
`ps` shows. The SQLite file's counterpart is models/store/files.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from models.errors import LannerError
from models.store.rows import Store, fetch_single

TOOLS_PACKAGE = "Debian's postgresql-client package (apt-get install postgresql-client)"


class DumpFailed(LannerError, RuntimeError):
    """pg_dump or pg_restore is missing or failed; the message is one sentence with its own first line."""


class DumpStore(Store):
    """Statements on a PostgreSQL connection about the database as a whole (PostgreSQL only: a SQLite
    file is copied whole, models/store/files.py)."""

    __slots__ = ()
    dialect = "postgres"
    # Exported from a REPEATABLE READ transaction: pg_dump --snapshot dumps exactly what it sees.
    SQL_EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"
    SQL_OTHER_SESSIONS = (
        "SELECT pid, COALESCE(NULLIF(application_name, ''), usename), COALESCE(host(client_addr), 'local') "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' ORDER BY pid"
    )
    SQL_TABLES = (
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    SQL_NODES = "SELECT name, spool_id, segment, byte_offset FROM spool_node ORDER BY name"
    SQL_PUT_NODE = (
        "INSERT INTO spool_node (name, spool_id, segment, byte_offset, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET spool_id = excluded.spool_id, segment = excluded.segment, "
        "byte_offset = excluded.byte_offset, updated_at = excluded.updated_at"
    )
    # The history's position the database trusts, and its last click.
    SQL_HISTORY_FACTS = (
        "SELECT (SELECT position FROM history_state WHERE id = 1), (SELECT COALESCE(MAX(id), 0) FROM click)"
    )
    SQL_HELD_BETWEEN = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"

    def export_snapshot(self) -> str:
        """The id of this (REPEATABLE READ) transaction's snapshot, for pg_dump --snapshot."""
        return fetch_single(self.conn, self.SQL_EXPORT_SNAPSHOT)[0]

    def other_sessions(self) -> list[tuple[int, str, str]]:
        """(pid, application or user, client address) of every other client on this database."""
        return [tuple(row) for row in self.conn.execute(self.SQL_OTHER_SESSIONS).fetchall()]

    def tables(self) -> set[str]:
        return {row[0] for row in self.conn.execute(self.SQL_TABLES).fetchall()}

    def nodes(self) -> list[tuple[str, str, int, int]]:
        """(name, spool id, segment, byte offset) of every node's spool position."""
        return [tuple(row) for row in self.conn.execute(self.SQL_NODES).fetchall()]

    def put_node(self, name: str, spool_id: str, segment: int, byte_offset: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_PUT_NODE, (name, spool_id, segment, byte_offset, now_ms)).close()

    def history_facts(self) -> tuple[int, int]:
        """(history_state.position, the largest click id)."""
        position, max_id = fetch_single(self.conn, self.SQL_HISTORY_FACTS)
        return int(position), int(max_id)

    def held_between(self, after: int, up_to: int) -> int:
        return fetch_single(self.conn, self.SQL_HELD_BETWEEN, (after, up_to))[0]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise DumpFailed(f"{name} is not installed: install {TOOLS_PACKAGE}.")
    return found


def _target(url: str) -> tuple[str, dict[str, str]]:
    """The URL as a libpq connection string without its password, and the environment carrying it."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    password = params.pop("password", None)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    if password:
        environ["PGPASSWORD"] = str(password)
    return make_conninfo(**{k: str(v) for k, v in params.items()}), environ


def _run(args: list[str], environ: dict[str, str], what: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, env=environ)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise DumpFailed(f"{what} failed: {lines[0] if lines else f'exit status {result.returncode}'}")
    return result.stdout


def dump_database(url: str, snapshot: str, target: Path) -> None:
    """pg_dump's custom format of the database as the exported `snapshot` sees it (that transaction
    must stay open until this returns)."""
    conninfo, environ = _target(url)
    args = [_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--snapshot={snapshot}"]
    _run([*args, f"--file={target}", f"--dbname={conninfo}"], environ, "pg_dump")


def dump_tables(source: Path) -> set[str]:
    """The tables a pg_dump archive holds (DumpFailed if it is none)."""
    listing = _run([_tool("pg_restore"), "--list", str(source)], dict(os.environ), "pg_restore --list")
    tables = set()
    for line in listing.splitlines():
        if line.startswith(";"):
            continue
        parts = line.split(";", 1)[-1].split()
        if len(parts) >= 5 and parts[2] == "TABLE":
            tables.add(parts[4])
    return tables


def restore_database(url: str, source: Path) -> None:
    """Replace the database's objects with the archive's, in one transaction: a failure leaves the
    database as it was."""
    conninfo, environ = _target(url)
    args = [_tool("pg_restore"), "--clean", "--if-exists", "--single-transaction", "--exit-on-error"]
    _run([*args, "--no-owner", "--no-privileges", f"--dbname={conninfo}", str(source)], environ, "pg_restore")
