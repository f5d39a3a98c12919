"""A cluster node's own landed visitors: the clicks its flusher landed, within the uniqueness windows, in a
SQLite file on the node's disk (`landed-visitors.sqlite` in its spool directory).

Cluster mode asked PostgreSQL once a click for the visitor's landed history (models/store/hotpath.py's
probe over the shared click table): a network round trip and a shared index for every click of every
node, the largest part of PostgreSQL's CPU per click (docs/SCALING.md, "The node's own visitor
history"). nginx sends one visitor to one node (`hash … consistent` on the visitor's address and User-
Agent, workers/ops/nginx.py), so a node asks its own file instead: one indexed read (a few µs, no
network). The node's unflushed clicks stay in its workers' journal index (models/clicks/visitors.py).
Together they are the node's answer for debounce and uniqueness: nothing of either is shared with the
other nodes (a visitor the ring moves counts unique on their new node once, docs/SCALING.md).

Written by the node's flusher only, before each batch's database transaction (INSERT OR IGNORE on the
subid: a batch landed again after a failed commit adds nothing), so a click the database has is in the
file whatever the flusher dies between; pruned past the longest uniqueness window once a minute. Read
by the node's web workers, each with its own connection (WAL: a reader never waits on the writer).
The file is the node's: a node started on a new disk begins with an empty one (its visitors' history
is then what Redis and the journal hold, docs/SCALING.md says what changes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from models.store import hotpath
from models.store.rows import fetch_one, fetch_single
from models.store.sqlite import hotpath as sqlite_hotpath

FILE_NAME = "landed-visitors.sqlite"
NODE_VISITOR_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, OSError)

SQL_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS landed (
    visitor_key INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    subid TEXT NOT NULL,
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER,
    offer_id INTEGER,
    lander_id INTEGER,
    PRIMARY KEY (visitor_key, created_at, subid)
) WITHOUT ROWID
""",
    "CREATE INDEX IF NOT EXISTS landed_created_at ON landed (created_at)",
)
SQL_ADD = "INSERT OR IGNORE INTO landed VALUES (?, ?, ?, ?, ?, ?, ?)"
SQL_PRUNE = "DELETE FROM landed WHERE created_at < ?"
SQL_COUNT = "SELECT COUNT(*) FROM landed"

# The click table's probes (models/store/hotpath.py), over this file: the visitor is its key alone (the
# key carries the User-Agent's hash, so debounce's "same User-Agent" needs no stored text).
SQL_HISTORY = f"""
SELECT campaign_id, stream_id, offer_id, created_at FROM landed
WHERE visitor_key = ?1 AND created_at >= ?2
ORDER BY created_at DESC LIMIT {hotpath.VISITOR_HISTORY_LIMIT}
"""
SQL_SEEN = """
SELECT
    EXISTS (SELECT 1 FROM landed WHERE visitor_key = ?1 AND created_at >= ?2),
    EXISTS (SELECT 1 FROM landed WHERE visitor_key = ?1 AND created_at >= ?3 AND campaign_id = ?4),
    EXISTS (SELECT 1 FROM landed WHERE visitor_key = ?1 AND created_at >= ?3 AND stream_id = ?5)
"""
SQL_LAST_CLICK = """
SELECT subid, stream_id, offer_id, created_at, lander_id FROM landed
WHERE visitor_key = ?1 AND created_at >= ?2 AND campaign_id = ?3
ORDER BY created_at DESC LIMIT 1
"""


def landed_visitors_path(spool_dir: Path) -> Path:
    return spool_dir / FILE_NAME


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode = wal").close()
        # A power cut may lose the last batches (the database has them; they count unseen once).
        conn.execute("PRAGMA synchronous = normal").close()
        for statement in SQL_SCHEMA:
            conn.execute(statement).close()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class LandedVisitorsWriter:
    """The node's flusher's side: add each batch's clicks, prune what every window has passed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = _connect(path)

    def add(self, rows: Iterable[tuple]) -> None:
        """(visitor_key, created_at, subid, campaign_id, stream_id, offer_id, lander_id) a click."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE").close()
        try:
            conn.executemany(SQL_ADD, rows).close()
            conn.execute("COMMIT").close()
        except BaseException:
            conn.execute("ROLLBACK").close()
            raise

    def prune(self, before_ms: int) -> int:
        """Delete the clicks older than `before_ms` (a minute's worth, once a minute); how many."""
        cursor = self.conn.execute(SQL_PRUNE, (before_ms,))
        deleted = cursor.rowcount
        cursor.close()
        return deleted

    def count(self) -> int:
        return fetch_single(self.conn, SQL_COUNT)[0]

    def close(self) -> None:
        self.conn.close()


class LandedVisitorProbe(sqlite_hotpath.VisitorProbe):
    """The probes of models/store/hotpath.py over the node's file (always SQLite, so SQLite's probe
    but for this file's statements): a web worker's history of the visitors its node landed. The
    `conn` its methods take is the file's (`LandedVisitors.conn`)."""

    __slots__ = ()
    dialect = "node-file"  # Always SQLite, whatever the database: the node's own file.
    BY_KEY = BY_IP_UA = ("landed", "visitor_key = ?1", 2)  # Unused: the statements are this file's.

    def __init__(self) -> None:  # Not the click table's probes: this file's own statements.
        self.by_key = True
        self._history, self._seen, self._last_click = SQL_HISTORY, SQL_SEEN, SQL_LAST_CLICK

    def last_click(
        self, conn: sqlite3.Connection, visitor: tuple, since: int, campaign_id: int, user_agent: str
    ) -> tuple | None:
        return fetch_one(conn, self._last_click, (*visitor, since, campaign_id))


class LandedVisitors:
    """A web worker's side: its connection to the node's file and the probes over it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = _connect(path)
        self.probe = LandedVisitorProbe()

    def close(self) -> None:
        self.conn.close()
