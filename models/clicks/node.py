"""Which node a spool belongs to: its name (LANNER_NODE_ID) and its own random id, kept in the spool.

Each node lands its own spool and keeps its own position in the database's `spool_node` row of that
name (migration 0012). The spool directory says whose it is, in DATA_DIR/spool/node-id ("NAME ID"),
written once by `lanner serve` or `lanner worker` at start: every process that reads the position
(web workers, the flusher, `lanner spool …`) asks the spool, so they cannot disagree, and a later
LANNER_NODE_ID that differs from the spool's own name is refused instead of starting a second
position over the same lines. A spool without the file (one made before 0012, or by a test that
never started a node) is the node `main`, unclaimed.
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from peewee import Database

from models.errors import LannerError
from models.store.clicks import ClickStore

NODE_FILE = "node-id"
DEFAULT_NODE = "main"
LIVE_NODE_MS = 60_000  # A node whose heartbeat is this recent is running (it beats every 5 s).


class NodeMismatch(LannerError):
    """The spool belongs to another node name than the one configured, or the database's row of
    this name is another spool's."""


def partial_number(name: str) -> int:
    """The node's partial of the rows every flusher adds onto (the rollups and cap counters' `node`,
    migration 0036): 0 for `main` (the single box; also what every other writer adds onto: postbacks,
    cost sets, the backfill), else 1 + the name's CRC-32 modulo 2^31 - 1, the same on every host.

    Readers add the partials up, so two names that meet on one number only share rows again (their
    flushers may wait on each other, as before 0036), never miscount; twenty names meet with a chance
    of about one in ten million."""
    if name == DEFAULT_NODE:
        return 0
    return 1 + zlib.crc32(name.encode()) % (2**31 - 1)


@dataclass(frozen=True, slots=True)
class SpoolNode:
    name: str
    spool_id: str  # "" for a spool that has no file yet: it claims no row.

    @property
    def partial(self) -> int:
        """Its partial of the rollup and cap-counter rows (partial_number)."""
        return partial_number(self.name)


_known: dict[Path, SpoolNode] = {}


def spool_node(spool_dir: Path) -> SpoolNode:
    """The node the spool belongs to (the file read once per process; no file: `main`, unclaimed)."""
    node = _known.get(spool_dir)
    if node is not None:
        return node
    try:
        text = (spool_dir / NODE_FILE).read_text()
    except FileNotFoundError:
        return SpoolNode(DEFAULT_NODE, "")  # Not cached: the file may be written later.
    try:
        name, spool_id = text.split()
    except ValueError:
        raise NodeMismatch(f"{spool_dir / NODE_FILE} is not NAME ID: restore it or remove it.") from None
    node = _known[spool_dir] = SpoolNode(name, spool_id)
    return node


def ensure_spool_node(spool_dir: Path, name: str) -> SpoolNode:
    """The spool's node, written as `name` with a new id if the spool has none yet; refuses a spool
    that is another node's."""
    node = spool_node(spool_dir)
    if node.spool_id:
        if node.name != name:
            raise NodeMismatch(
                f"The spool {spool_dir} belongs to node {node.name!r}, not {name!r} (LANNER_NODE_ID): "
                f"set LANNER_NODE_ID={node.name}, or give node {name!r} a data directory of its own."
            )
        return node
    spool_dir.mkdir(parents=True, exist_ok=True)
    spool_id = secrets.token_hex(16)
    partial = spool_dir / f"{NODE_FILE}.{spool_id}"
    partial.write_text(f"{name} {spool_id}\n")
    try:
        os.link(partial, spool_dir / NODE_FILE)  # Whole, and only the first of two starting processes'.
    except FileExistsError:
        pass
    finally:
        partial.unlink()
    return ensure_spool_node(spool_dir, name)


def refuse_a_second_node_alone(db: Database, name: str, now_ms: int | None = None) -> None:
    """Refuse to start a node beside another live one without Redis: debounce, caps and uniqueness
    would then be each node's alone (docs/SCALING.md), and a capped offer could be sent past its cap."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    others = [
        (other, host)
        for other, host, heartbeat_at, *_ in ClickStore(db.connection()).nodes()
        if other != name and heartbeat_at > now_ms - LIVE_NODE_MS
    ]
    if others:
        other, host = others[0]
        raise NodeMismatch(
            f"Node {other!r} ({host}) is running on this database too: several nodes share caps, "
            "debounce and uniqueness through Redis, so set LANNER_REDIS_URL on every node (docs/SCALING.md)."
        )
