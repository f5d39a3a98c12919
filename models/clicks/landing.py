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
from models.store.database import BUSY_TIMEOUT_MS, write_tx
from models.store.maintenance import MaintenanceStore

logger = logging.getLogger(__name__)


@dataclass
class Landed:
    """What one `land_all` did."""

    flushed: FlushResult
    settled: int = 0  # Parked postbacks matched to their clicks.
    queued: list[int] = field(default_factory=list)  # Outbound deliveries handed to `on_delivery`.
    segments_removed: bool = False  # The WAL was checkpointed whole and landed segments deleted.


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
    ) -> None:
        """`history`: where parked postbacks of clicks pruned from the row store are looked up."""
        self.db = db
        self.spool_dir = spool_dir
        self.segment_bytes = segment_bytes
        self.bots = flusher_bots(bot_ips, bot_ranges)
        self.recorder = ConversionRecorder(db, park_ms=park_ms, history=history)
        self.on_delivery = on_delivery
        self.held = held
        self.queue_failures = ThrottledLog(logger, logging.WARNING)
        self.syncer = SpoolSync()

    def sync(self) -> None:
        """fsync the unlanded segments; OSError if one failed (SpoolSync: never retried as is)."""
        self.syncer.sync(self.db, self.spool_dir)

    def close(self) -> None:
        self.syncer.close()
        if self.held is not None:
            self.held.close()

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
