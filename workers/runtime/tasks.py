"""The Huey instance and Lanner's background tasks (it replaces cron), and the spool flusher.

The spool flusher is a thread of `lanner worker` that flushes every `flush_interval` for as long as
the consumer runs, so clicks land within about a second; an flock on `DATA_DIR/flusher.lock` keeps
it single per data directory (a second `lanner worker` waits on standby). It depends on nothing but
the spool and the database: on a full disk it was a chain of Huey tasks whose lock release and
successor both wrote the queue database, so one ENOSPC stopped landing until someone restarted
the consumer. Now every failed round (a full disk, a held write lock) is logged at most once a
second and tried again, and the spool is fsynced once a second meanwhile. A failed fsync of the spool
does not stop the flush (before, it failed the round, and failing every second it kept any click from
landing): the clicks are then durable only once in the database.
WAL checkpoints run here, outside any visitor's request: PASSIVE every few seconds while clicks
land, TRUNCATE now and then (PASSIVE alone lets the WAL grow without bound under constant readers).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from huey import Huey, SqliteHuey, crontab

from models.accounts.principal import Principal
from models.alerts.delivery import due_alerts, send_alert
from models.alerts.senders import AlertConfig
from models.clicks.landing import SpoolLanding
from models.clicks.spool import LOST_SEGMENT_GRACE, HeldSegments
from models.clicks.throttledlog import ThrottledLog
from models.conversions.outbound import due_deliveries
from models.conversions.platforms.sending import PlatformConfig, deliver
from models.errors import LannerError
from models.lookups.crawlerranges import is_update_due, update_ranges
from models.lookups.geoupdate import GeoUpdateError, due_editions, update_geo_data
from models.migrations.deferred import pending_steps, run_deferred
from models.ops.retention import prune_postback_log
from models.reporting.bandits import refresh_bandits
from models.reporting.compaction import RUN_SECONDS as COMPACTION_SECONDS
from models.reporting.compaction import compact_history
from models.reporting.currency import CurrencyError, refresh_rates
from models.reporting.history import HistoryFiles, append_history
from models.reporting.historyclicks import click_history
from models.reporting.partials import fold_partials
from models.reporting.rawretention import INCOMPLETE, MISSING, UNREADABLE, prune_held_clicks
from models.reporting.subidcube import RUN_SECONDS as CUBE_SECONDS
from models.reporting.subidcube import build_cube
from models.store.database import (
    DRIVER_ERRORS,
    STORE_ERRORS,
    STORE_ROLLBACK_ERRORS,
    StoreBusy,
    db,
    open_database,
)
from models.store.duckdb.connection import HistoryBusy
from settings import Settings
from workers.runtime.alerting import run_ops_checks
from workers.runtime.heartbeat import Heartbeat, heartbeat_path
from workers.runtime.procfs import FLUSHER_THREAD, set_process_name, set_thread_name
from workers.runtime.spoolwake import SpoolWake

logger = logging.getLogger(__name__)

# What an append of the history is refused with for now (a full disk, a held write lock): the next
# minute tries again; a traceback would say nothing more.
HISTORY_RETRIED: tuple[type[BaseException], ...] = (StoreBusy, LannerError, OSError, *DRIVER_ERRORS)
# What a bandit refresh is refused with for now (a held write lock, PostgreSQL away, a report refused).
BANDIT_RETRIED: tuple[type[BaseException], ...] = (StoreBusy, LannerError, *DRIVER_ERRORS)

# What keeps fetched rates from being stored now (a held write lock, the database away): the next run.
RATES_RETRIED: tuple[type[BaseException], ...] = (StoreBusy, *DRIVER_ERRORS)

IDLE_FLUSH_PAUSE = 2.0  # Longest pause between flushes while no clicks arrive (no inotify).
# With inotify on the spool (workers/runtime/spoolwake.py) an idle flusher sleeps this long: a click
# appended wakes it at once, so only what it does on a timer is left, at this pace: the heartbeat (
# STALE_AFTER 30 s), the node's beat and the look for parked postbacks (both every 5 s when busy).
IDLE_WAIT = 5.0
# PERF: a batch's fixed cost (its transaction and commit, the counter and rollup upserts, on PostgreSQL
# the staging COPY and its INSERT) is paid per batch, and under load a round lands what arrived during
# the pause (it stops once caught up: models/clicks/spool.py): at flush_interval's 0.25 s a node at 400
# clicks/s would land ~100 a batch. Measured on
# PostgreSQL (docs/SCALING.md "The flusher's batch size"): flusher and server CPU ~115-155 µs a click
# at 100 a batch, ~65 at 500, ~55 at 2,000. So a round that lands clicks waits long enough for the next
# to hold about FLUSH_BATCH_TARGET, at most FLUSH_STRETCH flush intervals and never past the next
# fsync of the spool (SYNC_EVERY: what a power cut may cost stays the same). 2,000 (it was 500): on
# SQLite a commit writes every index leaf its batch touched into the WAL, and the click table's index
# of random keys (the visitor key's: subids are time-ordered) takes about a leaf a click; in a batch
# twice as big more clicks share a leaf (docs/PERFORMANCE.md, "CPU a click at 4,000/s offered, fourth
# pass").
FLUSH_BATCH_TARGET = 2000
FLUSH_STRETCH = 4
# PERF: the flusher's own connection keeps this much of the database in its page cache (the others keep
# PRAGMAS' 2 MB). Each batch inserts into that index and the rollup rows; with 2 MB their leaves fell
# out of the cache between batches and were read back from the WAL or the file every batch (the
# same section: with the bigger batches, ~13 % of the flusher's CPU a click in process on the bench's
# 400,000-click database; 16 MB did as well as 32, which cost `lanner worker` ~36 MB more PSS).
FLUSHER_CACHE_MB = 16
FAILED_ROUND_PAUSE = 1.0  # Pause after a round that failed (a full disk, a held write lock).
STANDBY_PAUSE = 1.0  # Seconds between looks at the flusher lock another `lanner worker` holds.
FLUSHER_STOP_SECONDS = 10.0  # How long `lanner worker` waits for a flush in progress when it stops.
# Huey's scheduler reads the schedule (a delivery's or an alert's retry) this often, and the periodic
# tasks each minute as before: a retry runs up to this late; 1 s (Huey's default) was a read of Redis
# or the queue database a second on every node, idle or not.
SCHEDULER_SECONDS = 5
CONSUMER_SIGNAL_SECONDS = 1.0  # How soon Huey's main thread notices SIGTERM/SIGINT (Huey's: 0.1 s).
SYNC_EVERY = 1.0  # Seconds between fsyncs of the spool: a power cut may cost about this much.
CHECKPOINT_EVERY = 2.0  # Seconds between PASSIVE checkpoints while clicks are landing.
TRUNCATE_EVERY = 30.0  # Seconds between TRUNCATE checkpoints.
TRUNCATE_WAL_BYTES = 64 * 1024 * 1024  # ...or sooner, once the WAL is this big.
NODE_BEAT_EVERY = 5.0  # Seconds between the node's heartbeats in the database (`lanner status`).
# Seconds between looks for parked postbacks whose click has landed, besides the look after each flush
# that lands clicks: on PostgreSQL a postback can miss its click landing on another node (or in this
# node's flush) and be parked just after that flush's look; and a look the database refused is tried again.
SETTLE_EVERY = 5.0


def flush_pause(landed: int, since: float, interval: float, until_sync: float) -> float:
    """The pause after a round that landed `landed` clicks `since` seconds after the round before: long
    enough for the next to hold about FLUSH_BATCH_TARGET at this rate, between `interval` and
    FLUSH_STRETCH intervals, and no later than the next fsync of the spool (`until_sync` from now)."""
    rate = landed / max(since, interval)
    return max(interval, min(FLUSH_BATCH_TARGET / rate, interval * FLUSH_STRETCH, until_sync))


class SpoolFlusher:
    """One data directory's SpoolLanding, paced: the unit the flusher thread loops over.

    fsyncs and checkpoints are paced by time, not by flush: each one stalls the file system for
    a moment, and the web workers append to it.
    """

    def __init__(self, settings: Settings, on_delivery=None) -> None:
        # SQLite's -wal file, whose size hastens a TRUNCATE checkpoint; PostgreSQL has none of Lanner's.
        self.wal_path = (
            None
            if settings.uses_postgres
            else settings.database_path.with_name(settings.database_path.name + "-wal")
        )
        self.last_truncate = self.last_checkpoint = self.last_sync = time.monotonic()
        self.last_beat = self.last_settle = 0.0
        self.heartbeat = Heartbeat(heartbeat_path(settings.data_dir))  # For `lanner status`, /healthz.
        self.landing = SpoolLanding(
            db,
            settings.spool_dir,
            settings.spool_segment_bytes,
            bot_ips=settings.bot_ips,
            bot_ranges=settings.bot_ranges_path,
            park_ms=settings.postback_park_ms,
            on_delivery=on_delivery,
            # Descriptors on the unlanded segments, kept across rounds: one deleted by hand is restored.
            held=HeldSegments(LOST_SEGMENT_GRACE),
            # The node that keeps the history matches parked postbacks of clicks only it holds.
            history=click_history(settings) if settings.keeps_history else None,
            # Cluster mode: the node's own visitor history, which its web workers read instead of
            # asking PostgreSQL per click (models/store/nodevisitors.py).
            visitor_window_ms=int(settings.uniqueness_hours * 3_600_000) if settings.redis_url else None,
            cache_megabytes=FLUSHER_CACHE_MB,
        )
        self.sync_failures = ThrottledLog(logger)

    def run_once(self) -> int:
        self.heartbeat.attempt()
        now = time.monotonic()
        if now - self.last_sync >= SYNC_EVERY:
            # Before the flush, which fails while the database cannot be written (a full disk):
            # the spool is then all there is. Paced even when it fails, so a failing fsync
            # cannot keep the flush from being tried.
            self.last_sync = now
            try:
                self.landing.sync()
            except OSError as exc:
                # Not a failed round: the flush below is what makes these clicks durable now (in the
                # database, checkpointed), and SpoolSync writes the bytes again before the next fsync.
                self.sync_failures(
                    "spool flusher: fsync of the click spool failed (%s): its unlanded clicks are durable "
                    "only once landed; the bytes are written again before the next fsync",
                    exc.strerror or exc,
                )
        result = self.landing.flush(on_batch=self.heartbeat.on_batch)
        if result.inserted or now - self.last_settle >= SETTLE_EVERY:
            self.last_settle = now
            self.landing.settle_parked()  # Postbacks that arrived before their click, now landed.
        if now - self.last_truncate >= TRUNCATE_EVERY or (
            (result.inserted or result.segments_done) and now - self.last_checkpoint >= CHECKPOINT_EVERY
        ):
            self.checkpoint()
        if now - self.last_beat >= NODE_BEAT_EVERY:
            self.last_beat = now
            try:
                self.landing.beat()
            except STORE_ERRORS + (OSError,) as exc:  # The clicks landed; the next beat says so.
                logger.debug("could not write the node's heartbeat: %s", exc)
        return result.inserted

    def close(self) -> None:
        self.landing.close()

    def checkpoint(self) -> None:
        self.last_checkpoint = time.monotonic()
        try:
            wal_bytes = self.wal_path.stat().st_size if self.wal_path else 0
        except FileNotFoundError:
            wal_bytes = 0
        truncate = wal_bytes > TRUNCATE_WAL_BYTES or time.monotonic() - self.last_truncate > TRUNCATE_EVERY
        self.landing.checkpoint(truncate=truncate)
        if truncate:
            self.last_truncate = time.monotonic()


class FileLock:
    """An exclusive flock on a file in the data directory; the kernel drops it when its holder dies.

    Not Huey's lock_task: that lock is a row in the queue database, and on a full disk releasing it
    failed, so it stayed set and the flusher never started again.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; False if another thread or process does."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # Closing drops the flock.
            self._fd = -1


Result = TypeVar("Result")


class FlusherThread(threading.Thread):
    """The spool flusher's loop, in its own thread of `lanner worker`, until `stop()`."""

    def __init__(
        self, settings: Settings, on_delivery: Callable[[int], None], *, idle_wait: float = IDLE_WAIT
    ) -> None:
        super().__init__(name="lanner-flusher", daemon=True)
        self.settings = settings
        self.on_delivery = on_delivery
        self.idle_wait = idle_wait
        self.stopping = threading.Event()
        self.spool_wake = SpoolWake(settings.spool_dir)
        self.is_idle = threading.Event()  # Set while it waits for a click (tests wait for it).
        self.lock = FileLock(settings.data_dir / "flusher.lock")
        self.failures = ThrottledLog(logger, logging.WARNING)
        self.failed_rounds = 0

    def stop(self, timeout: float = FLUSHER_STOP_SECONDS) -> None:
        self.stopping.set()
        self.spool_wake.wake()
        self.join(timeout)

    def run(self) -> None:
        set_thread_name(FLUSHER_THREAD)
        try:
            while not self.stopping.is_set():
                is_mine = self.attempt(self.lock.acquire)
                if not is_mine:
                    self.stopping.wait(STANDBY_PAUSE)  # Another `lanner worker` flushes this data dir.
                    continue
                try:
                    self.flush_until_stopped()
                finally:
                    self.lock.release()
        finally:
            self.spool_wake.close()

    def flush_until_stopped(self) -> None:
        flusher = self.attempt(self.new_flusher)
        if flusher is None:
            self.stopping.wait(FAILED_ROUND_PAUSE)
            return
        self.attempt(flusher.landing.settle_parked)  # Also expires the ones that waited too long.
        interval = self.settings.flush_interval
        pause, started = interval, time.monotonic()
        wake = self.spool_wake
        while not self.stopping.is_set():
            since, started = time.monotonic() - started, time.monotonic()
            landed = self.attempt(flusher.run_once)
            is_waiting = False
            if landed is None:
                pause = FAILED_ROUND_PAUSE
            elif landed:
                wake.disarm()  # Paced by time under load: no inotify event per appended click.
                until_sync = flusher.last_sync + SYNC_EVERY - time.monotonic()
                pause = flush_pause(landed, since, interval, until_sync)
            elif wake.is_armed:
                # Idle, and was already before this round looked: a click appended since wakes it.
                pause, is_waiting = self.idle_wait, True
            elif wake.arm():
                pause = interval  # One more look, now that a click appended after it wakes the wait.
            else:
                # Idle without inotify: look less and less often (up to IDLE_FLUSH_PAUSE) so a quiet
                # tracker costs ~no CPU; the first clicks after a lull still land within seconds.
                pause = min(pause * 2, IDLE_FLUSH_PAUSE)
            if is_waiting:
                self.is_idle.set()
            wake.wait(pause)
            self.is_idle.clear()
        wake.disarm()
        flusher.close()

    def new_flusher(self) -> SpoolFlusher:
        db.connect(reuse_if_open=True)  # This thread's own connection.
        return SpoolFlusher(self.settings, self.on_delivery)

    def attempt(self, step: Callable[[], Result]) -> Result | None:
        """Run one step; on failure log (at most once a second) and return None: the next round retries.

        Nothing is lost by a failed round: the clicks wait in the spool, and a flush is one
        transaction with its journal position, so it lands exactly once when it works again.
        """
        try:
            result = step()
        except STORE_ERRORS + (OSError,) as exc:
            # The disk is full ("database or disk is full", ENOSPC), or a long writer (a deferred
            # index build) held the write lock past busy_timeout.
            self.failed(exc)
            return None
        except Exception as exc:
            self.failed(exc, exc_info=True)
            return None
        if self.failed_rounds:
            logger.warning("spool flusher: working again after %d failed round(s)", self.failed_rounds)
            self.failed_rounds = 0
        return result

    def failed(self, exc: BaseException, *, exc_info: bool = False) -> None:
        self.failed_rounds += 1
        cause = exc.cause if isinstance(exc, StoreBusy) else exc
        self.failures("spool flusher: %s; trying again", cause, exc_info=exc_info)
        # SQLite may or may not have rolled back after an I/O error; leave no transaction open.
        try:
            connection = db.connection()
            if connection.in_transaction:
                connection.rollback()
        except STORE_ROLLBACK_ERRORS:
            pass  # Nothing to undo after all; the next round starts its own transaction.


def create_huey(settings: Settings, *, immediate: bool = False, is_consumer: bool = False) -> Huey:
    """SqliteHuey in the data directory on one box; with LANNER_REDIS_URL, the cluster's queue on Redis
    (workers/runtime/redisqueue.py), which every node's consumer serves (`is_consumer`: the consumer's
    own, whose reads block)."""
    if settings.redis_url:
        from workers.runtime.redisqueue import create_redis_huey

        huey = create_redis_huey(settings, is_consumer=is_consumer)
    else:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        huey = SqliteHuey(name="lanner", filename=str(settings.queue_path), results=False, utc=True)
    huey.immediate = immediate
    register_tasks(huey, settings)
    register_legacy_names(huey)
    return huey


# Huey keys a queued task by its module and name. Releases before the store seam registered them in
# workers/tasks.py: a queue such a release leaves behind on an upgrade must still load, not fail as
# "not found in TaskRegistry" (its deliveries would wait for the minute's sweep).
LEGACY_TASK_MODULE = "workers.tasks"


def register_legacy_names(huey: Huey) -> None:
    # Huey has no public alias; its registry is a dict from identifier to task class.
    registry = huey._registry._registry
    for identifier, task_class in list(registry.items()):
        module, _, name = identifier.rpartition(".")
        if module == __name__:
            registry.setdefault(f"{LEGACY_TASK_MODULE}.{name}", task_class)


# How long a cluster-wide sweep's tick counts as done (models/cluster/sweeps.py): half the time
# between its ticks, so every node's copy of one tick finds it and the next tick does not.
MINUTELY = 30.0
HOURLY = 1800.0


def cluster_wide(huey: Huey, settings: Settings) -> Callable[[str, float], Callable]:
    """A decorator for a sweep of the shared database: on Redis, each tick runs on one node of the
    cluster (models/cluster/sweeps.py); on one box the sweep is left as it is."""
    if not settings.redis_url:
        return lambda name, window: lambda sweep: sweep
    from models.cluster.sweeps import ClusterSweeps

    client = getattr(huey.storage, "conn", None)  # None in immediate mode (memory storage).
    if client is None:
        import redis

        client = redis.Redis.from_url(settings.redis_url)
    sweeps = ClusterSweeps(client, settings.redis_prefix, settings.node_id)
    huey.sweeps = sweeps  # For `lanner status`.

    def once(name: str, window: float) -> Callable:
        def wrap(sweep: Callable[[], None]) -> Callable[[], None]:
            @functools.wraps(sweep)
            def guarded() -> None:
                sweeps.run(name, window, sweep)

            return guarded

        return wrap

    return once


# The ECB publishes the day's reference rates at about 16:00 CET (15:00 UTC in winter, 14:00 in summer).
RATES_SCHEDULE = crontab(hour="16", minute="7")

# Four times a day: a day is folded within six hours of its margin's end (models/reporting/partials.py).
FOLD_SCHEDULE = crontab(hour="*/6", minute="17")

# The sweeps of the node's own files (DATA_DIR/geo, the crawler ranges): on every node, not once.
GEO_SCHEDULE = crontab(hour="4", minute="41")
BOT_RANGES_SCHEDULE = crontab(hour="4", minute="53")


def renew_schedule(settings: Settings) -> Callable:
    """Daily, at a time of night of this install's own (from its data directory and node name): ACME
    servers ask their clients not to renew all at the same minute."""
    spread = zlib.crc32(f"{settings.node_id}:{settings.data_dir}".encode())
    return crontab(hour=str(2 + spread % 3), minute=str(spread // 3 % 60))


def keep_history(settings: Settings) -> None:
    """The minute's append of the columnar history (the clicks and conversions landed and changed since),
    then the raw clicks past LANNER_RAW_RETENTION it now holds pruned. A refusal waits for the next
    minute."""
    files = HistoryFiles.of(settings)
    try:
        result = append_history(db, files)
    except HistoryBusy:  # `lanner analytics rebuild` (or a slow append) holds it: next minute.
        return
    except HISTORY_RETRIED as exc:
        logger.warning("history not appended now (%s); the next minute tries again", exc)
        return
    if result.copied or result.recopied:
        logger.info("history: %s clicks copied, %s copied again", result.copied, result.recopied)
    compact_closed_days(files)
    cube_closed_days(files)
    if not settings.raw_retention:
        return
    try:
        run = prune_held_clicks(
            db, files, settings.raw_retention, global_uniqueness_hours=settings.uniqueness_hours
        )
    except HistoryBusy:
        return
    except HISTORY_RETRIED as exc:
        logger.warning("raw clicks not pruned now (%s); the next minute tries again", exc)
        return
    if run.deleted:
        logger.info("retention: %s raw clicks the history holds deleted", run.deleted)
    elif run.plan.state in (INCOMPLETE, MISSING, UNREADABLE):  # Waiting or behind: it passes.
        logger.warning("retention: %s", run.plan.reason)


def compact_closed_days(files: HistoryFiles) -> None:
    """The minute's share of the history's compaction (models/reporting/compaction.py): closed days
    rewritten campaign by campaign, for at most RUN_SECONDS. A refusal waits for the next minute."""
    try:
        run = compact_history(files, seconds=COMPACTION_SECONDS)
    except HistoryBusy:
        return
    except HISTORY_RETRIED as exc:
        logger.warning("history not compacted now (%s); the next minute tries again", exc)
        return
    if run.moved:
        logger.info("history: %s clicks compacted, %s closed days left", run.moved, run.days_left)


def cube_closed_days(files: HistoryFiles) -> None:
    """The minute's share of building the history's sub id cube (models/reporting/subidcube.py): closed
    days (and those changed since) summed, for at most CUBE_SECONDS. A refusal waits for the next minute."""
    try:
        run = build_cube(files, seconds=CUBE_SECONDS)
    except HistoryBusy:
        return
    except HISTORY_RETRIED as exc:
        logger.warning("history's sub id cube not built now (%s); the next minute tries again", exc)
        return
    if run.days:
        logger.info("history: the sub id cube of %s days built, %s closed days left", run.days, run.days_left)


def keep_node_history(settings: Settings) -> None:
    """Cluster mode, in the node sweeps' thread of LANNER_HISTORY_NODE: the file is this node's, so its
    append is never queued where another node's consumer could take it."""
    db.connect(reuse_if_open=True)  # The thread's own connection.
    keep_history(settings)


def node_jobs(settings: Settings) -> list[tuple]:
    """What workers/runtime/nodesweeps.py runs on each node in cluster mode (Huey's tasks on one box),
    and the node's web workers' views of Redis published for the other nodes (runtime/redisview.py)."""
    from workers.runtime.redisview import publish_node_view

    jobs = []
    if settings.keeps_history:  # Every minute, and once at start: a history lost while it was down.
        jobs.append(("append_history", lambda at: True, lambda: keep_node_history(settings)))
    if settings.alert_check_minutes:  # This node's spool and disk: its alerts go out with the minute's sweep.
        every = settings.alert_check_minutes
        schedule = crontab(minute="0" if every == 60 else f"*/{every}")
        jobs.append(("check_node_operations", schedule, lambda: check_node_operations(settings)))
    return jobs + [
        ("update_geo_data", GEO_SCHEDULE, lambda: update_geo_files(settings)),
        ("update_bot_ranges", BOT_RANGES_SCHEDULE, lambda: update_crawler_ranges(settings)),
        ("publish_node_view", lambda at: True, lambda: publish_node_view(settings)),  # Every minute.
    ]


def check_node_operations(settings: Settings) -> None:
    """Cluster mode, in the node sweeps' thread: this node's own operations checks (its spool, its disk)."""
    db.connect(reuse_if_open=True)  # The thread's own connection.
    run_ops_checks(settings, db, is_shared=False)


def update_geo_files(settings: Settings) -> None:
    """Daily: fetch each configured geo edition whose data is UPDATE_AFTER_DAYS old (monthly in effect;
    a day's retry when the source has nothing newer yet). The file in use stays on any failure."""
    if not settings.geo_source:
        return
    due = due_editions(settings)
    if not due:
        return
    try:
        for result in update_geo_data(settings, due):
            logger.info("geo data %s: %s built %s", result.edition, result.database_type, result.built_at)
    except GeoUpdateError as exc:
        logger.warning("geo data not updated: %s", exc)


def update_crawler_ranges(settings: Settings) -> None:
    """The published crawler networks, when LANNER_BOT_RANGES_UPDATE_DAYS says they are due."""
    path = settings.bot_ranges_path
    if not settings.bot_ranges_update_days or path is None:
        return
    if not is_update_due(path, settings.bot_ranges_update_days):
        return
    report = update_ranges(settings.bot_range_sources, path)
    if report.failed:
        logger.warning("crawler ranges: %s", "; ".join(report.lines))
    elif report.data is not None:  # Always, once it returns.
        logger.info("crawler ranges updated: %s networks", report.data.network_count)


# The periodic spend sync's actor in the audit log.
SPEND_WORKER = Principal(None, "worker", "admin", True, False)


def sync_spend(settings: Settings) -> None:
    """One round of the spend connections' syncs (models/reporting/spend/): a platform's failure is that
    run's error in its sync log, retried at the next round; a refused write waits for the next round too."""
    from models.reporting.spend.connections import sync_active
    from models.reporting.spend.sync import SpendConfig

    try:
        runs = sync_active(db, SpendConfig.from_settings(settings), actor=SPEND_WORKER)
    except RATES_RETRIED as exc:
        logger.warning("spend not synced now (%s); the next run tries again", exc)
        return
    for run in runs:
        if run["error"]:
            logger.warning("spend of %s not synced: %s", run["name"], run["error"])


def run_due_rules(settings: Settings, send_alert: Callable[[int], object] | None = None) -> None:
    """One run of every enabled rule; a rule that cannot be evaluated now (its report refused) is
    logged and tried at the next run. `send_alert` is given the id of each message queued to a rule's
    channel."""
    from models.optimisation.rules import run_rules
    from models.optimisation.sourcepause import SourceAccess

    try:
        result = run_rules(
            db, history=HistoryFiles.for_reports(settings), sources=SourceAccess.from_settings(settings)
        )
    except HISTORY_RETRIED as exc:
        logger.warning("rules not run now (%s); the next run tries again", exc)
        return
    for plan in result.plans:
        if plan.error:
            logger.warning("rule %s not evaluated: %s", plan.rule.name, plan.error)
    for planned, why in result.skipped:
        logger.warning(
            "rule %s: %s of campaign %s not done now: %s",
            planned.rule,
            planned.target,
            planned.campaign_id,
            why,
        )
    for planned in result.acted:
        logger.info(
            "rule %s: %s %s in campaign %s (%s)",
            planned.rule,
            planned.action,
            planned.target,
            planned.campaign_id,
            planned.reason,
        )
    for alert_id in result.alert_ids:
        if send_alert is not None:
            send_alert(alert_id)


def register_tasks(huey: Huey, settings: Settings) -> None:
    once = cluster_wide(huey, settings)
    platforms = PlatformConfig.from_settings(settings)
    alert_config = AlertConfig.from_settings(settings)

    @huey.task(name="send_alert")
    def send_alert_task(alert_id: int) -> None:
        """One alert to its channel (models/alerts/delivery.py); a failure is retried after its backoff."""
        result = send_alert(db, alert_id, config=alert_config, retry_base=settings.alert_retry_seconds)
        if result.state == "pending":
            logger.warning(
                "alert %s not sent (%s); retried in %.0f s", alert_id, result.error, result.retry_in
            )
            send_alert_task.schedule((alert_id,), delay=result.retry_in)
        elif result.state == "failed":
            logger.warning("alert %s failed for good: %s", alert_id, result.error)

    @huey.periodic_task(crontab(minute="*"), name="send_due_alerts")
    @once("send_due_alerts", MINUTELY)
    def send_due_alerts() -> None:
        """Alerts whose task was lost (a consumer restart) or whose retry is due."""
        for alert_id in due_alerts(db):
            send_alert_task(alert_id)

    if settings.alert_check_minutes:
        every_check = settings.alert_check_minutes
        check_schedule = crontab(minute="0" if every_check == 60 else f"*/{every_check}")

        @huey.periodic_task(check_schedule, name="check_operations")
        @once("check_operations", every_check * 30.0)
        def check_operations() -> None:
            """The operations alerts (workers/runtime/alerting.py). In cluster mode this is the install's
            checks, on one node a tick; each node checks its own spool and disk in its node sweeps."""
            try:
                changes = run_ops_checks(settings, db, is_local=not settings.redis_url)
            except BANDIT_RETRIED as exc:
                logger.warning("operations not checked now (%s); the next run checks again", exc)
                return
            for change in changes:
                for alert_id in change.alert_ids:
                    send_alert_task(alert_id)

        huey.check_operations = check_operations

    huey.send_alert = send_alert_task
    huey.send_due_alerts = send_due_alerts

    @huey.task(name="send_postback")
    def send_postback_task(delivery_id: int) -> None:
        """A postback target's delivery, or an ad platform connection's event with its batch-mates."""
        result = deliver(db, delivery_id, retry_base=settings.postback_retry_seconds, config=platforms)
        if result.state == "pending":
            send_postback_task.schedule((delivery_id,), delay=result.retry_in)
        elif result.state in ("failed", "expired"):
            logger.warning("outbound postback %s %s for good: %s", delivery_id, result.state, result.error)

    @huey.periodic_task(crontab(minute="*"), name="send_due_postbacks")
    @once("send_due_postbacks", MINUTELY)
    def send_due_postbacks() -> None:
        """Deliveries whose task was lost (a consumer restart) or whose retry is due."""
        for delivery_id in due_deliveries(db):
            send_postback_task(delivery_id)

    # A file lock, like the flusher's: Huey's lock in the queue database stays set when its
    # release fails on a full disk.
    deferred_lock = FileLock(settings.data_dir / "deferred.lock")

    @huey.periodic_task(crontab(minute="*"), name="run_deferred_steps")
    @once("run_deferred_steps", MINUTELY)
    def run_deferred_steps() -> None:
        """Heavy migration steps (backfills) in short chunks; resumes where a restart stopped it."""
        if not pending_steps(db):
            return
        if not deferred_lock.acquire():
            return
        try:
            for step in run_deferred(db):
                logger.info("deferred step %s: %s", step.name, step.state)
        except STORE_ERRORS as exc:  # A full disk, a held write lock: the chunk rolled back whole.
            logger.warning("deferred steps wait (%s); the next run goes on where they stopped", exc)
        finally:
            deferred_lock.release()

    @huey.periodic_task(FOLD_SCHEDULE, name="fold_partials")
    @once("fold_partials", HOURLY)
    def fold_partials_task() -> None:
        """The nodes' partial rollup and cap-counter rows of the closed days summed into one row per key
        (models/reporting/partials.py); a chunk refused rolls back whole and the next run goes on."""
        try:
            result = fold_partials(db, time.time())
        except STORE_ERRORS as exc:
            logger.warning("partials not folded now (%s); the next run folds them", exc)
            return
        if result.chunks:
            logger.info(
                "folded %s partial rows of %s day(s) through %s",
                result.rows,
                len(result.days),
                result.through,
            )

    huey.fold_partials = fold_partials_task

    if settings.keeps_history and not settings.redis_url:  # In cluster mode the node's own thread does.

        @huey.periodic_task(crontab(minute="*"), name="append_history")
        def append_history_task() -> None:
            """The clicks landed and mutated since the last minute, into the columnar history."""
            keep_history(settings)

        huey.append_history = append_history_task

    if settings.rules_interval_minutes:
        every = settings.rules_interval_minutes
        schedule = crontab(minute="0" if every == 60 else f"*/{every}")

        @huey.periodic_task(schedule, name="evaluate_rules")
        @once("evaluate_rules", every * 30.0)
        def evaluate_rules() -> None:
            """The automation rules (models/optimisation/rules.py): each acts within its limit, logged."""
            run_due_rules(settings, send_alert_task)

        huey.evaluate_rules = evaluate_rules

    if settings.spend_sync_minutes:
        every = settings.spend_sync_minutes
        # At :11 past (not :00): the platforms' reports are busiest on the hour.
        spend_schedule = crontab(minute="11" if every == 60 else f"*/{every}")

        @huey.periodic_task(spend_schedule, name="sync_spend")
        @once("sync_spend", every * 30.0)
        def sync_spend_task() -> None:
            """Each active spend connection's window of spend, read again and written as costs."""
            sync_spend(settings)

        huey.sync_spend = sync_spend_task

    @huey.periodic_task(crontab(minute="23"), name="prune_postback_log")
    @once("prune_postback_log", HOURLY)
    def prune_postback_log_task() -> None:
        """Hourly, so each run deletes about an hour's rows (LANNER_POSTBACK_LOG_DAYS)."""
        prune_postback_log(db, settings.postback_log_days)

    @huey.periodic_task(RATES_SCHEDULE, name="refresh_exchange_rates")
    @once("refresh_exchange_rates", HOURLY)  # Daily ticks: an hour's window tells one from the next.
    def refresh_exchange_rates() -> None:
        """The day's rates from LANNER_EXCHANGE_RATE_URL (the ECB's by default), if set; a feed that
        fails keeps the stored rates, logs one sentence, and is read again at the next run."""
        if not settings.exchange_rate_url:
            return
        try:
            result = refresh_rates(db, settings.exchange_rate_url)
        except CurrencyError as exc:
            logger.warning("exchange rates not refreshed: %s", exc)
            return
        except RATES_RETRIED as exc:
            logger.warning("exchange rates not stored now (%s); the next run reads them again", exc)
            return
        if result.stored:
            logger.info(
                "exchange rates refreshed: %s new or changed (%s)", len(result.stored), ", ".join(result.days)
            )

    @huey.periodic_task(crontab(minute="*"), name="refresh_bandits")
    @once("refresh_bandits", MINUTELY)
    def refresh_bandits_task() -> None:
        """Smart rotation's shares from each bandit stream's numbers (models/reporting/bandits.py); web
        workers follow within seconds. A refused round keeps the shares they have until the next minute."""
        try:
            refresh_bandits(db, history=HistoryFiles.for_reports(settings))
        except BANDIT_RETRIED as exc:
            logger.warning("bandit shares not refreshed now (%s); the next minute tries again", exc)

    if not settings.redis_url:  # In cluster mode each node runs these itself (workers/runtime/nodesweeps.py).

        @huey.periodic_task(GEO_SCHEDULE, name="update_geo_data")
        def update_geo_data_task() -> None:
            update_geo_files(settings)

        @huey.periodic_task(BOT_RANGES_SCHEDULE, name="update_bot_ranges")
        def update_bot_ranges() -> None:
            update_crawler_ranges(settings)

        huey.update_geo_data = update_geo_data_task
        huey.update_bot_ranges = update_bot_ranges

    @huey.task(name="sync_spend_connection")
    def sync_spend_connection(connection_id: int, actor_name: str) -> None:
        """ "Sync now" from the panel or the API (models/reporting/spend/connections.py queue_sync): one
        connection's run, its log row the page and the API show; a platform's failure is that run's error."""
        from models.reporting.spend.connections import sync_queued
        from models.reporting.spend.sync import SpendConfig

        try:
            run = sync_queued(db, connection_id, actor_name, SpendConfig.from_settings(settings))
        except RATES_RETRIED as exc:
            logger.warning("spend connection %s not synced now (%s); sync it again", connection_id, exc)
            return
        if run is None:
            logger.info("spend connection %s: the queued sync was not needed (paused, or ran)", connection_id)
        elif run["error"]:
            logger.warning("spend connection %s not synced: %s", connection_id, run["error"])

    @huey.task(name="get_certificate")
    def get_certificate(domain_id: int) -> None:
        """A domain added or changed in the panel or the API: its certificate (certbot, minutes at worst)."""
        from workers.ops.certs import CertError, secure_domain

        try:
            secure_domain(db, settings, domain_id)
        except CertError as exc:
            logger.warning("domain %s: %s", domain_id, exc)

    @huey.periodic_task(renew_schedule(settings), name="renew_certificates")
    def renew_certificates_task() -> None:
        """Daily `certbot renew` (due at 30 days left) on the host whose nginx serves the domains (it has
        their certificates: workers/ops/certs.py); a renewed certificate reloads nginx."""
        from workers.ops.certs import CertError, renew_due

        try:
            renewed = renew_due(db, settings)
        except CertError as exc:
            logger.warning("certificates not renewed: %s", exc)
            return
        if renewed:
            logger.info("certificates renewed: %s", ", ".join(renewed))

    @huey.on_startup()
    def connect_db() -> None:
        db.connect(reuse_if_open=True)  # Each consumer thread gets its own connection.

    huey.send_postback = send_postback_task
    huey.send_due_postbacks = send_due_postbacks
    huey.run_deferred_steps = run_deferred_steps
    huey.prune_postback_log = prune_postback_log_task
    huey.refresh_exchange_rates = refresh_exchange_rates
    huey.refresh_bandits = refresh_bandits_task
    huey.get_certificate = get_certificate
    huey.sync_spend_connection = sync_spend_connection
    huey.renew_certificates = renew_certificates_task


def run_consumer(settings: Settings) -> None:
    """`lanner worker`: the spool flusher's thread and the Huey consumer in the foreground."""
    # Clicks only wait for the web workers; the flusher catching up 100 ms later costs nothing.
    os.nice(settings.worker_nice)
    set_process_name("lanner-worker")  # How `lanner status` tells it from the web workers under `lanner run`.
    open_database(settings.database_location)
    huey = create_huey(settings, is_consumer=True)
    flusher = FlusherThread(settings, huey.send_postback)
    flusher.start()
    node_sweeps = None
    if settings.redis_url:  # The node's own files: this node updates them, on their schedule.
        from workers.runtime.nodesweeps import NodeSweepThread

        node_sweeps = NodeSweepThread(node_jobs(settings))
        node_sweeps.start()
    try:
        try:
            huey.run_deferred_steps()  # At once, not at the next minute.
            huey.refresh_exchange_rates()  # Likewise: a restart does not wait for the next day's run.
            if settings.rules_interval_minutes:
                huey.evaluate_rules()  # And the rules: a restart does not skip a run.
            huey.send_due_alerts()  # Alerts queued while it was down go now, not at the next minute.
            if settings.alert_check_minutes:
                huey.check_operations()
            if settings.keeps_history and node_sweeps is None:
                huey.append_history()  # A history lost or damaged while the worker was down: made now.
            if node_sweeps is None:
                huey.update_geo_data()  # A source just configured is used now, not at 04:41 (if data is due).
                huey.update_bot_ranges()  # And the crawler ranges, if they are due, not at the next night.
        except Exception as exc:  # The queue cannot be written (a full disk, Redis away).
            logger.warning("could not queue the deferred steps now (%s); they run within a minute", exc)
        consumer = huey.create_consumer(
            workers=4, worker_type="thread", periodic=True, scheduler_interval=SCHEDULER_SECONDS
        )
        # Huey's main thread looks for a signal every 0.1 s: ten wake-ups a second on every node for
        # a stop that may wait a second (the worker threads' health is checked every 10 s anyway).
        consumer._stop_flag_timeout = CONSUMER_SIGNAL_SECONDS
        consumer.run()
    finally:
        flusher.stop()
        if node_sweeps is not None:
            node_sweeps.stop()
