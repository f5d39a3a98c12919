"""One spool position per node (`spool_node`), and each node's health, for cluster mode.

Until now one row (`spool_position`, id 1) said how far the box's spool had landed. With several
nodes on one PostgreSQL, each lands its own spool, so each needs its own position, written in the
same transaction as its rows; the row also carries what `lanner status` shows of every node (its
last heartbeat, host, unlanded bytes, flusher lag). A single box is the node `main` (LANNER_NODE_ID's
default), which inherits the old row's position: its spool goes on landing where it was.

`spool_id` is the spool directory's own random id (written in DATA_DIR/spool/node-id on first use):
a node whose id differs from its row's refuses to land, so two hosts given the same LANNER_NODE_ID
can never move one position over two different spools. An empty one is claimed by the first flusher.
"""

COLUMNS = """
    name TEXT NOT NULL PRIMARY KEY,
    spool_id TEXT NOT NULL DEFAULT '',
    segment {int} NOT NULL,
    byte_offset {int} NOT NULL,
    updated_at {int} NOT NULL,
    heartbeat_at {int} NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    unlanded_bytes {int} NOT NULL DEFAULT 0,
    backlog_ms {int}"""
MOVE = (
    "INSERT INTO spool_node (name, segment, byte_offset, updated_at) "
    "SELECT 'main', segment, byte_offset, updated_at FROM spool_position"
)


def apply(db):
    db.execute_sql(f"CREATE TABLE spool_node ({COLUMNS.format(int='INTEGER')}\n) WITHOUT ROWID")
    db.execute_sql(MOVE)
    db.execute_sql("DROP TABLE spool_position")


def apply_postgres(db):
    db.execute_sql(f"CREATE TABLE spool_node ({COLUMNS.format(int='BIGINT')}\n)")
    db.execute_sql(MOVE)
    db.execute_sql("DROP TABLE spool_position")
