"""`lanner backup` and `lanner restore` on PostgreSQL (cluster mode, or one box on PostgreSQL): a pg_dump
of one snapshot paired with the report node's columnar history, and a restore that keeps every node's
spool position. The SQLite file's are models/ops/backup.py; the history's reconciliation is shared.

Backup. On the node that keeps the history (LANNER_HISTORY_NODE; the box itself without Redis), holding
the history's append.lock (every writer of the file holds it: appends, raw retention, rebuild, repair;
PostgreSQL's `history_state` positions move only under it): the file's position and clicks are read,
the file is copied under its shared lock, and a REPEATABLE READ transaction exports its snapshot. The
lock is then let go and pg_dump dumps that snapshot (however long it takes: the worker's appends go on
meanwhile), so the dump holds the database as it was while no writer of the file could run: its
`history_state.position` at or below the file's, every click its retention deleted in the file, and no
click in the file past the dump's last. Mutations queued meanwhile (`history_change`) are in the
snapshot with their clicks. On a node that keeps no history the dump is taken alone, and says so.

Restore. Refused while another client is connected to the database (every node's `lanner serve` and
`lanner worker` must be stopped), and when the database holds tables the dump lacks (a later Lanner's
migrations: restore into an empty database). pg_restore replaces every object the dump holds in one
transaction. Each node's spool position (`spool_node`: spool id, segment, offset) is then set back to
what the replaced database held, read before: a node's journal lives on its own host and went on after
the backup. The dump's older position would make the node land again the lines it landed after the
backup (or, where it deleted those segments once landed, report them missing); the replaced database's
makes it go on where it stopped: every line it had not landed lands in the restored database, none
twice, none skipped. The clicks landed after the backup are not in the restored database (a restore
goes back to the backup), and the output says how far each node had gone. A node the replaced
database does not know (a restore into an empty database, after losing the old one) keeps the dump's
position: the lines of its spool after it land again into the restored database, which lacks them.
The positions are written in a transaction of their own right after pg_restore's: a restore stopped
between the two leaves the dump's positions, as a restore into an empty database does: the nodes then
land again only lines the restored database lacks (and note as missing the segments deleted since),
never a click twice.
The history taken with the dump is put in place on this node (the file here moved aside), or, without
one, this node's history is cut back or trusted less, as on SQLite (models/ops/backup.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from peewee import Database

from models.ops.backup import (
    HISTORY_BUSY,
    WRITER_WAIT,
    BackupError,
    BackupResult,
    history_copy_path,
    install_taken,
    place_backup,
    reconcile_history,
    taken_history,
)
from models.reporting.history import HistoryFiles
from models.store.database import connect, read_tx, write_tx
from models.store.duckdb.connection import (
    HistoryBusy,
    HistoryMissing,
    HistoryUnreadable,
    copy_history,
    holding_writers,
    open_history,
)
from models.store.duckdb.history import ColumnarHistory
from models.store.dumps import DumpFailed, DumpStore, dump_database, dump_tables, restore_database
from models.store.files import CopyHistory
from models.store.history import HistoryStore
from models.store.meta import MetaStore


@dataclass(frozen=True)
class DumpFacts:
    """What the dump holds of the history: the position it trusts and its last click."""

    position: int
    max_click_id: int


def backup_postgres(
    url: str, target: Path, history: HistoryFiles | None, elsewhere: str = ""
) -> tuple[BackupResult, DumpFacts]:
    """pg_dump the database to `target` (which must not exist) with the history beside it; `history`
    None: this node keeps none (`elsewhere` says which does)."""
    history_target = history_copy_path(target)
    for path in (target, history_target):
        if path.exists():
            raise BackupError(f"{path} already exists; choose a new file name.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    history_partial = history_target.with_name(history_target.name + ".partial")
    db = connect(url)
    taken: tuple[int, int] | None = None
    note = elsewhere
    try:
        with read_tx(db):  # The snapshot is the transaction's first statement's: export_snapshot.
            if history is None or not history.path.exists():
                note = note or "There is no click history to back up yet."
                snapshot, facts = _snapshot(db)
            else:
                try:
                    with holding_writers(history.path, WRITER_WAIT):
                        with open_history(
                            history.path, write=False, memory_limit=history.memory_limit
                        ) as conn:
                            held = ColumnarHistory(conn, history.path.parent)
                            taken = held.position(), held.count()[0]
                        copy_history(history.path, history_partial)
                        snapshot, facts = _snapshot(db)
                except HistoryBusy:
                    raise BackupError(HISTORY_BUSY) from None
                except (HistoryMissing, HistoryUnreadable) as error:
                    # The database is backed up all the same: it is the system of record.
                    taken, note = None, f"The click history was not backed up: {error}"
                    snapshot, facts = _snapshot(db)
            try:
                dump_database(url, snapshot, partial)
            except DumpFailed as error:
                raise BackupError(str(error)) from None
    except BaseException:
        for path in (partial, history_partial, history_partial.with_name(history_partial.name + ".wal")):
            path.unlink(missing_ok=True)
        raise
    finally:
        db.close()
    if taken is None:
        os.replace(partial, target)
        return BackupResult(target.stat().st_size, None, note=note), facts
    size = place_backup(partial, target, history_partial, history_target)
    return BackupResult(size, history_target, taken[1], taken[0]), facts


def _snapshot(db: Database) -> tuple[str, DumpFacts]:
    store = DumpStore(db.connection())
    snapshot = store.export_snapshot()
    return snapshot, DumpFacts(*store.history_facts())


@dataclass(frozen=True)
class NodePosition:
    """A node's spool position after a restore: `kept` from the replaced database, else the dump's."""

    name: str
    segment: int
    byte_offset: int
    dumped: tuple[int, int] | None  # Where the dump had it (None: the dump did not know the node).
    kept: bool


@dataclass(frozen=True)
class PgRestoreResult:
    nodes: list[NodePosition] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # What was done with the click history, sentences.


class _RestoredPostgres:
    """The restored database as the history's reconciliation sees it (models/ops/backup.py Restored)."""

    def __init__(self, db: Database, has_history_state: bool) -> None:
        self.db = db
        conn = db.connection()
        self.facts: CopyHistory | None = None  # A dump from before the history (migration 0021).
        if has_history_state:
            position, max_id = DumpStore(conn).history_facts()
            self.facts = CopyHistory(position, max_id, MetaStore(conn).pruned_before(), None, None)

    def settle(self, position: int | None) -> None:
        if position is not None:
            with write_tx(self.db):
                HistoryStore(self.db.connection()).set_position(position)

    def pruned_between(self, after: int, up_to: int) -> int:
        """Ids a sequence skipped count too: at most this many."""
        return max(0, up_to - after - DumpStore(self.db.connection()).held_between(after, up_to))


def restore_postgres(url: str, backup: Path, history: HistoryFiles | None) -> PgRestoreResult:
    """Replace the database with the dump `backup`, keep every node's spool position, and put the
    history taken with it in place (or make this node's consistent with it)."""
    if not backup.is_file():
        raise BackupError(f"There is no backup file {backup}.")
    try:
        tables = dump_tables(backup)
    except DumpFailed as error:
        raise BackupError(f"{backup} is not a pg_dump archive ({error}).") from None
    if "migration_history" not in tables:
        raise BackupError(f"{backup} is not a dump of a Lanner database (it has no migration_history).")
    companion = history_copy_path(backup)
    taken = taken_history(companion, None, history) if history and companion.exists() else None
    replaced = _replaced_nodes(url, tables)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    lock = holding_writers(history.path, WRITER_WAIT) if history is not None else contextlib.nullcontext()
    try:
        with lock:
            try:
                restore_database(url, backup)
            except DumpFailed as error:
                raise BackupError(f"{error}; the database is as it was.") from None
            db = connect(url)
            try:
                nodes = _keep_positions(db, replaced)
                notes: list[str] = []
                if history is not None:
                    restored = _RestoredPostgres(db, "history_state" in tables)
                    if taken is not None:
                        notes = install_taken(companion, taken, restored, history, stamp)
                    else:
                        notes = reconcile_history(companion.name, restored, history, stamp)
            finally:
                db.close()
    except HistoryBusy:
        raise BackupError("Another process is writing the click history: stop lanner worker first.") from None
    return PgRestoreResult(nodes, notes)


def _replaced_nodes(url: str, dumped_tables: set[str]) -> dict[str, tuple[str, int, int]]:
    """Every node's (spool id, segment, offset) in the database about to be replaced; refuses while
    another client uses it, or when it holds tables the dump lacks."""
    db = connect(url)
    try:
        store = DumpStore(db.connection())
        others = store.other_sessions()
        if others:
            named = ", ".join(f"{who} from {where} (pid {pid})" for pid, who, where in others[:5])
            raise BackupError(
                f"{len(others)} other client(s) are connected to the database: {named}; stop lanner serve "
                "and lanner worker on every node (and anything else using it) first."
            )
        tables = store.tables()
        extra = sorted(tables - dumped_tables)
        if extra:
            raise BackupError(
                f"The database has tables the backup lacks ({', '.join(extra[:5])}: a later Lanner's); "
                "restore into an empty database (createdb) and point LANNER_DATABASE_URL at it."
            )
        if "spool_node" not in tables:
            return {}
        return {name: (spool_id, segment, offset) for name, spool_id, segment, offset in store.nodes()}
    finally:
        db.close()


def _keep_positions(db: Database, replaced: dict[str, tuple[str, int, int]]) -> list[NodePosition]:
    """Set every node the replaced database knew back to its position there; say where each stands."""
    store = DumpStore(db.connection())
    dumped = {name: (segment, offset) for name, _, segment, offset in store.nodes()}
    now_ms = int(time.time() * 1000)
    with write_tx(db):
        for name, (spool_id, segment, offset) in replaced.items():
            store.put_node(name, spool_id, segment, offset, now_ms)
    nodes = [
        NodePosition(name, segment, offset, dumped.get(name), True)
        for name, (_, segment, offset) in sorted(replaced.items())
    ]
    nodes += [
        NodePosition(name, *position, position, False)
        for name, position in sorted(dumped.items())
        if name not in replaced
    ]
    return sorted(nodes, key=lambda node: node.name)
