"""Landing the spool: its lines into the click table, then what follows from them.

One service for `lanner worker`'s flusher thread (paced: workers/runtime/tasks.py) and for
`lanner spool flush` (everything at once), so both do the same: fsync the spool, flush it, settle
the postbacks that were parked waiting for the clicks just landed and queue their outbound
deliveries, checkpoint the WAL, and delete the segments whose rows are in the database file.
On PostgreSQL there is no WAL of Lanner's to checkpoint (MaintenanceStore's checkpoint is a no-op
that answers True): a committed row is durable on the server, so landed segments go at once.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from peewee import Database

from models.clicks.backlog import backlog_age
from models.clicks.node import spool_node
from models.clicks.record import (
    CAMPAIGN_ID,
    CREATED_AT,
    IP,
    LANDER_ID,
    OFFER_ID,
    STREAM_ID,
    SUBID,
    UA_HASH,
    visitor_key,
)
from models.clicks.spool import (
    FlushResult,
    HeldSegments,
    SpoolSync,
    flush_spool,
    flusher_bots,
    remove_flushed_segments,
    unlanded_bytes,
)
from models.clicks.throttledlog import ThrottledLog
from models.conversions.postbacks import ConversionRecorder
from models.reporting.historyclicks import ClickHistory
from models.store.clicks import ClickStore
from models.store.database import BUSY_TIMEOUT_MS, read_tx, write_tx
from models.store.maintenance import MaintenanceStore
from models.store.nodevisitors import (
    NODE_VISITOR_ERRORS,
    LandedVisitorsWriter,
    landed_visitors_path,
)
from models.store.retention import RetentionStore

logger = logging.getLogger(__name__)


@dataclass
class Landed:
    """What one `land_all` did."""

    flushed: FlushResult
    settled: int = 0  # Parked postbacks matched to their clicks.
    queued: list[int] = field(default_factory=list)  # Outbound deliveries handed to `on_delivery`.
    segments_removed: bool = False  # The WAL was checkpointed whole and landed segments deleted.


PRUNE_EVERY = 60.0  # Seconds between prunes of the node's visitor file.


class NodeVisitorFile:
    """The flusher's side of the node's own visitor file (models/store/nodevisitors.py): each batch's
    clicks before it lands, pruned past the longest uniqueness window once a minute. It never stops
    the landing: a file that cannot be written (a full disk) is logged, and those clicks' visitors
    count as unseen on this node later (unique again once)."""

    def __init__(self, db: Database, spool_dir: Path, window_ms: int) -> None:
        self.db, self.spool_dir, self.window_ms = db, spool_dir, window_ms
        self.writer: LandedVisitorsWriter | None = None
        self.next_prune = 0.0
        self.failures = ThrottledLog(logger, logging.WARNING, interval=60.0)

    def add(self, rows: list[list]) -> None:
        visitors = [
            (
                row[-1] if row[-1] is not None else visitor_key(row[IP], row[UA_HASH]),
                row[CREATED_AT],
                row[SUBID],
                row[CAMPAIGN_ID],
                row[STREAM_ID],
                row[OFFER_ID],
                row[LANDER_ID],
            )
            for row in rows
        ]
        try:
            if self.writer is None:
                self.writer = LandedVisitorsWriter(landed_visitors_path(self.spool_dir))
            self.writer.add(visitors)
            if time.monotonic() >= self.next_prune:
                self.next_prune = time.monotonic() + PRUNE_EVERY
                self.writer.prune(int(time.time() * 1000) - self._longest_window_ms())
        except NODE_VISITOR_ERRORS as error:
            self.failures(
                "the node's visitor file in %s cannot be written (%s): its visitors of these clicks count "
                "as unseen on this node later",
                self.spool_dir,
                error,
            )

    def _longest_window_ms(self) -> int:
        with read_tx(self.db):
            windows = RetentionStore(self.db.connection()).campaign_windows()
        return max([self.window_ms, *(int(hours * 3_600_000) for _, hours in windows)])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class SpoolLanding:
    """Land one data directory's spool into `db`.

    `on_delivery(delivery_id)` queues an outbound postback (a Huey task); it may fail (a full queue
    database) without failing the landing: the delivery row is stored, and `lanner worker`'s
    periodic sweep sends it.
    """

    def __init__(
        self,
        db: Database,
        spool_dir: Path,
        segment_bytes: int,
        *,
        bot_ips: tuple[str, ...],
        park_ms: int,
        bot_ranges: Path | None = None,
        on_delivery: Callable[[int], None] | None = None,
        held: HeldSegments | None = None,
        history: ClickHistory | None = None,
        visitor_window_ms: int | None = None,
        cache_megabytes: int | None = None,
    ) -> None:
        """`history`: where parked postbacks of clicks pruned from the row store are looked up.
        `visitor_window_ms` (cluster mode): keep the node's own visitor file (models/store/
        nodevisitors.py) for at least this long, or a campaign's longer uniqueness window.
        `cache_megabytes`: the page cache of this thread's connection to `db` from now on."""
        self.db = db
        if cache_megabytes is not None:
            MaintenanceStore(db.connection()).keep_cache(cache_megabytes)
        self.spool_dir = spool_dir
        self.segment_bytes = segment_bytes
        self.bots = flusher_bots(bot_ips, bot_ranges)
        self.recorder = ConversionRecorder(db, park_ms=park_ms, history=history)
        self.on_delivery = on_delivery
        self.held = held
        self.queue_failures = ThrottledLog(logger, logging.WARNING)
        self.syncer = SpoolSync()
        self.visitors: NodeVisitorFile | None = None
        if visitor_window_ms is not None:
            self.visitors = NodeVisitorFile(db, spool_dir, visitor_window_ms)

    def sync(self) -> None:
        """fsync the unlanded segments; OSError if one failed (SpoolSync: never retried as is)."""
        self.syncer.sync(self.db, self.spool_dir)

    def close(self) -> None:
        self.syncer.close()
        if self.held is not None:
            self.held.close()
        if self.visitors is not None:
            self.visitors.close()

    def flush(
        self, *, batch_size: int = 2000, on_batch: Callable[[FlushResult], None] | None = None
    ) -> FlushResult:
        return flush_spool(
            self.db,
            self.spool_dir,
            self.segment_bytes,
            batch_size=batch_size,
            bots=self.bots,
            on_batch=on_batch,
            held=self.held,
            before_landing=self.visitors.add if self.visitors is not None else None,
        )

    def beat(self) -> None:
        """The node's heartbeat in the database (its host, unlanded bytes, backlog), which `lanner
        status` shows for every node: a stat per segment and one small read."""
        now = time.time()
        age = backlog_age(self.db, self.spool_dir, now)
        pending = unlanded_bytes(self.db, self.spool_dir)
        with write_tx(self.db):
            ClickStore(self.db.connection()).beat(
                spool_node(self.spool_dir).name,
                int(now * 1000),
                socket.gethostname(),
                pending,
                None if age is None else int(age * 1000),
            )

    def settle_parked(self) -> tuple[int, list[int]]:
        """Apply the parked postbacks whose click has landed (and expire the ones that waited too
        long); queue their deliveries. Returns (postbacks settled, deliveries queued)."""
        outcomes = self.recorder.settle_parked()
        queued = [delivery for outcome in outcomes for delivery in outcome.deliveries]
        for delivery_id in queued:
            self.queue_delivery(delivery_id)
        return len(outcomes), queued

    def queue_delivery(self, delivery_id: int) -> None:
        if self.on_delivery is None:
            return  # The periodic sweep of `lanner worker` sends it within a minute.
        try:
            self.on_delivery(delivery_id)
        except Exception as exc:  # The delivery row is stored: `send_due_postbacks` sends it.
            self.queue_failures("could not queue outbound postback %s: %s", delivery_id, exc)

    def checkpoint(self, *, truncate: bool) -> bool:
        """Checkpoint the WAL; once it is all in the database file (fsynced), delete the landed
        segments. Returns whether they could be deleted."""
        store = MaintenanceStore(self.db.connection())
        if not store.checkpoint(truncate=truncate, busy_timeout_ms=BUSY_TIMEOUT_MS):
            return False
        remove_flushed_segments(self.db, self.spool_dir)
        return True

    def land_all(
        self, *, batch_size: int = 2000, on_batch: Callable[[FlushResult], None] | None = None
    ) -> Landed:
        """Everything the flusher does over its rounds, once: what `lanner spool flush` runs."""
        self.sync()
        landed = Landed(self.flush(batch_size=batch_size, on_batch=on_batch))
        landed.settled, landed.queued = self.settle_parked()
        # TRUNCATE gives up at once while a reader holds the WAL; PASSIVE may still get it all.
        landed.segments_removed = self.checkpoint(truncate=True) or self.checkpoint(truncate=False)
        return landed
