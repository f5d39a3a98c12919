"""The Huey instance and Lanner's background tasks (it replaces cron).

The spool flusher is a task that flushes every `flush_interval` for a bounded stretch and then
queues itself again, so clicks land within about a second; a lock keeps it single, a periodic
task restarts the chain within a minute if a crash broke it, and the consumer queues it at start.
WAL checkpoints run here, outside any visitor's request: PASSIVE every few seconds while clicks
land, TRUNCATE now and then (PASSIVE alone lets the WAL grow without bound under constant readers).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from huey import SqliteHuey, crontab
from huey.exceptions import TaskLockedException
from peewee import OperationalError

from models import db, open_database
from models.database import PRAGMAS
from models.deferred import pending_steps, run_deferred
from models.outbound import due_deliveries, send_delivery
from models.postbacks import ConversionRecorder
from models.spool import flush_spool, flusher_bots, remove_flushed_segments, sync_spool
from settings import Settings
from workers.heartbeat import Heartbeat, heartbeat_path
from workers.procfs import set_process_name

logger = logging.getLogger(__name__)

FLUSHER_STRETCH = 10.0  # Seconds one flusher task runs before queueing its successor.
IDLE_FLUSH_PAUSE = 2.0  # Longest pause between flushes while no clicks arrive.
SYNC_EVERY = 1.0  # Seconds between fsyncs of the spool: a power cut may cost about this much.
CHECKPOINT_EVERY = 2.0  # Seconds between PASSIVE checkpoints while clicks are landing.
TRUNCATE_EVERY = 30.0  # Seconds between TRUNCATE checkpoints.
TRUNCATE_WAL_BYTES = 64 * 1024 * 1024  # ...or sooner, once the WAL is this big.


class SpoolFlusher:
    """Flush, fsync, checkpoint, delete landed segments; the unit the task loops over.

    fsyncs and checkpoints are paced by time, not by flush: each one stalls the file system for
    a moment, and the web workers append to it.
    """

    def __init__(self, settings: Settings, on_delivery=None) -> None:
        self.settings = settings
        self.recorder = ConversionRecorder(db, park_ms=settings.postback_park_ms)
        self.on_delivery = on_delivery
        self.wal_path = settings.database_path.with_name(settings.database_path.name + "-wal")
        self.last_truncate = self.last_checkpoint = self.last_sync = time.monotonic()
        self.heartbeat = Heartbeat(heartbeat_path(settings.data_dir))  # For `lanner status`, /healthz.

    def run_once(self) -> int:
        self.heartbeat.attempt()
        now = time.monotonic()
        if now - self.last_sync >= SYNC_EVERY:
            sync_spool(db, self.settings.spool_dir)
            self.last_sync = now
        result = flush_spool(
            db,
            self.settings.spool_dir,
            self.settings.spool_segment_bytes,
            bots=flusher_bots(self.settings.bot_ips),
            on_batch=self.heartbeat.on_batch,
        )
        if result.inserted:
            self.settle_parked()
        if now - self.last_truncate >= TRUNCATE_EVERY or (
            (result.inserted or result.segments_done) and now - self.last_checkpoint >= CHECKPOINT_EVERY
        ):
            self.checkpoint()
        return result.inserted

    def settle_parked(self) -> None:
        """Postbacks that arrived before their click: apply the ones whose click just landed."""
        for outcome in self.recorder.settle_parked():
            for delivery_id in outcome.deliveries:
                if self.on_delivery:
                    self.on_delivery(delivery_id)

    def checkpoint(self) -> None:
        self.last_checkpoint = time.monotonic()
        try:
            wal_bytes = self.wal_path.stat().st_size
        except FileNotFoundError:
            wal_bytes = 0
        truncate = wal_bytes > TRUNCATE_WAL_BYTES or time.monotonic() - self.last_truncate > TRUNCATE_EVERY
        mode = "TRUNCATE" if truncate else "PASSIVE"
        if truncate:
            # TRUNCATE waits for readers while holding the write lock: a long report in the admin
            # worker would stall every writer behind it (postbacks in the web workers). Without
            # a busy timeout it gives up at once (busy = 1), after a PASSIVE pass, and we retry later.
            db.execute_sql("PRAGMA busy_timeout = 0")
        try:
            busy, wal_pages, done_pages = db.execute_sql(f"PRAGMA wal_checkpoint({mode})").fetchone()
        finally:
            if truncate:
                db.execute_sql(f"PRAGMA busy_timeout = {PRAGMAS['busy_timeout']}")
        if truncate:
            self.last_truncate = time.monotonic()
        # Segments may go only once their rows are in the database file itself (fsynced).
        if not busy and wal_pages == done_pages:
            remove_flushed_segments(db, self.settings.spool_dir)


@contextmanager
def lock_timeouts_survived() -> Iterator[None]:
    """A long writer (a deferred index build) held the lock past busy_timeout: log it and go on.

    The clicks wait in the spool; the flusher gives up one round, not its chain of tasks.
    """
    try:
        yield
    except OperationalError as exc:
        if "locked" not in str(exc):
            raise
        logger.warning("spool flusher: %s; trying again", exc)


def create_huey(settings: Settings, *, immediate: bool = False) -> SqliteHuey:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    huey = SqliteHuey(name="lanner", filename=str(settings.queue_path), results=False, utc=True)
    huey.immediate = immediate
    register_tasks(huey, settings)
    return huey


def register_tasks(huey: SqliteHuey, settings: Settings) -> None:
    # A crashed consumer leaves the lock behind; the consumer flushes locks when it starts.
    flusher_lock = huey.lock_task("spool-flusher")

    @huey.task(name="flush_spool")
    def flush_spool_task(stretch: float = FLUSHER_STRETCH) -> None:
        try:
            flusher_lock.acquire()
        except TaskLockedException:
            return  # Another flusher is running; the chain stays single.
        try:
            db.connect(reuse_if_open=True)
            flusher = SpoolFlusher(settings, send_postback_task)
            with lock_timeouts_survived():
                flusher.settle_parked()  # Also expires the ones that waited too long.
            deadline = time.monotonic() + stretch
            pause = settings.flush_interval
            while True:
                landed = 0
                with lock_timeouts_survived():
                    landed = flusher.run_once()
                if time.monotonic() >= deadline:
                    break
                # Idle: look less and less often (up to IDLE_FLUSH_PAUSE) so a quiet tracker
                # costs ~no CPU; the first clicks after a lull still land within seconds.
                pause = settings.flush_interval if landed else min(pause * 2, IDLE_FLUSH_PAUSE)
                time.sleep(pause)
        finally:
            flusher_lock.release()
        if not huey.immediate:
            flush_spool_task()

    @huey.periodic_task(crontab(minute="*"), name="keep_spool_flusher")
    def keep_spool_flusher() -> None:
        if not flusher_lock.is_locked():
            flush_spool_task()

    @huey.task(name="send_postback")
    def send_postback_task(delivery_id: int) -> None:
        result = send_delivery(db, delivery_id, retry_base=settings.postback_retry_seconds)
        if result.state == "pending":
            send_postback_task.schedule((delivery_id,), delay=result.retry_in)
        elif result.state == "failed":
            logger.warning("outbound postback %s failed for good: %s", delivery_id, result.error)

    @huey.periodic_task(crontab(minute="*"), name="send_due_postbacks")
    def send_due_postbacks() -> None:
        """Deliveries whose task was lost (a consumer restart) or whose retry is due."""
        for delivery_id in due_deliveries(db):
            send_postback_task(delivery_id)

    deferred_lock = huey.lock_task("deferred-steps")

    @huey.periodic_task(crontab(minute="*"), name="run_deferred_steps")
    def run_deferred_steps() -> None:
        """Heavy migration steps (backfills) in short chunks; resumes where a restart stopped it."""
        if not pending_steps(db):
            return
        try:
            deferred_lock.acquire()
        except TaskLockedException:
            return
        try:
            for step in run_deferred(db):
                logger.info("deferred step %s: %s", step.name, step.state)
        finally:
            deferred_lock.release()

    @huey.on_startup()
    def connect_db() -> None:
        db.connect(reuse_if_open=True)  # Each consumer thread gets its own connection.

    huey.flush_spool = flush_spool_task
    huey.send_postback = send_postback_task
    huey.send_due_postbacks = send_due_postbacks
    huey.run_deferred_steps = run_deferred_steps


def run_consumer(settings: Settings) -> None:
    """`lanner worker`: the Huey consumer in the foreground, flusher chain started at once."""
    # Clicks only wait for the web workers; the flusher catching up 100 ms later costs nothing.
    os.nice(settings.worker_nice)
    set_process_name("lanner-worker")  # How `lanner status` tells it from the web workers under `lanner run`.
    open_database(settings.database_path)
    huey = create_huey(settings)
    huey.flush_spool()
    huey.run_deferred_steps()  # At once, not at the next minute.
    consumer = huey.create_consumer(workers=4, worker_type="thread", periodic=True, flush_locks=True)
    consumer.run()
