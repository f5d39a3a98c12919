"""`lanner status`: the page users look at when the panel feels slow, like PHP-FPM's status page.

The web master records its pid in `DATA_DIR/web.pid` while it runs; everything else is read from
/proc, the database, the spool and the Huey queue (its file, or in cluster mode Redis:
workers/ops/clusterstatus.py), so asking costs the tracker nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from settings import Settings
from workers.runtime.procfs import children, is_alive, process_name, rss_kb, uptime_seconds

if TYPE_CHECKING:
    from peewee import Database  # Not at run time: `lanner serve`'s master imports this module.

# The names the processes give themselves (/proc/<pid>/comm); `lanner run` starts the consumer as
# a child of the web master.
ROLES = {"lanner-web": "web", "lanner-admin": "admin", "lanner-worker": "consumer"}


def pid_file(settings: Settings) -> Path:
    return settings.data_dir / "web.pid"


@contextmanager
def recorded_pid(settings: Settings) -> Iterator[None]:
    """Record the web master's pid for the duration of the block."""
    path = pid_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        if path.exists() and path.read_text().strip() == str(os.getpid()):
            path.unlink()


def web_status(settings: Settings) -> dict[str, Any]:
    try:
        master = int(pid_file(settings).read_text())
    except (OSError, ValueError):
        return {"running": False}
    if not is_alive(master):
        return {"running": False, "stale_pid_file": True}
    workers = [
        {
            "pid": pid,
            "role": ROLES.get(process_name(pid), "other"),
            "uptime_s": uptime_seconds(pid),
            "rss_mb": round((rss_kb(pid) or 0) / 1024, 1),
        }
        for pid in children(master)
    ]
    return {
        "running": True,
        "master_pid": master,
        "uptime_s": uptime_seconds(master),
        "workers": workers,
    }


def _file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def queue_depth(settings: Settings) -> dict[str, Any]:
    """Tasks waiting in the Huey queue (the data directory's file, or the cluster's on Redis), through
    Huey's storage API (its tables and keys are Huey's business)."""
    from workers.runtime.tasks import create_huey

    huey = create_huey(settings)
    try:
        return {"pending_tasks": huey.pending_count(), "scheduled_tasks": huey.scheduled_count()}
    except Exception as error:  # Redis does not answer: the `redis` section says why.
        if not settings.redis_url:
            raise
        from workers.ops.clusterstatus import masked, redis_secret

        return {"error": masked(error, redis_secret(settings.redis_url)) or type(error).__name__}
    finally:
        huey.storage.close()


def collect_status(settings: Settings, db: Database) -> dict[str, Any]:
    """Web processes, the consumer (heartbeat, lag), spool depth and last flush, queue depth, database
    size, the geo file, the crawler ranges, deferred migration steps, parked postbacks and outbound postbacks
    waiting."""
    from models.alerts.ops import alert_summary
    from models.clicks.node import spool_node
    from models.clicks.refusals import read_refused
    from models.clicks.spool import spool_status
    from models.migrations.deferred import list_steps
    from models.store.clicks import ClickStore
    from models.store.conversions import PostbackLogStore
    from models.store.deliveries import DeliveryStore
    from workers.ops.clusterstatus import cluster_status
    from workers.runtime.heartbeat import consumer_status  # Here: the web master imports this module.

    spool = spool_status(db, settings.spool_dir)
    clicks = ClickStore(db.connection())
    flushed_at = clicks.landed_at(spool_node(settings.spool_dir).name)
    refused, refused_at = read_refused(settings.spool_dir)  # Clicks refused on a full disk, ever.
    status: dict[str, Any] = {
        "web": web_status(settings),
        "consumer": consumer_status(
            settings.data_dir, db, settings.spool_dir, backlog_alert_seconds=settings.backlog_alert_seconds
        ),
        "database": database_status(settings, db),
        "spool": {
            "pending_clicks": spool.pending_clicks,
            "pending_bytes": spool.pending_bytes,
            "segments": len(spool.segments),
            "last_flush_s_ago": round(time.time() - flushed_at / 1000, 1) if flushed_at else None,
            "missing_segments": spool.missing_segments,
            "damaged_segments": spool.damaged_segments,
            "rejected_lines": spool.rejected_lines,
            "refused_clicks": refused,
            "last_refused_s_ago": round(time.time() - refused_at / 1000, 1) if refused_at else None,
        },
    }
    if settings.redis_url or settings.queue_path.exists():
        status["queue"] = queue_depth(settings)
    status.update(cluster_status(settings, db))  # `postgresql` and `redis`, when configured.
    if settings.redis_url:  # Each of this node's web workers' own view of Redis.
        from workers.runtime.redisview import read_node_views, read_views

        status["redis"]["node"] = settings.node_id
        status["redis"]["workers"] = read_views(settings.data_dir)
        if status["redis"]["state"] == "ok":  # Other nodes' views, as their `lanner worker` published them.
            others = read_node_views(settings)
            if "error" in others:
                from workers.ops.clusterstatus import masked, redis_secret

                others["error"] = masked(others["error"], redis_secret(settings.redis_url))
            status["redis"]["other_nodes"] = others
    status["geo"] = geo_status(settings)
    status["bot_ranges"] = bot_ranges_status(settings.bot_ranges_path)
    status["deferred"] = {step.name: f"{step.state} {step.percent:.1f}%" for step in list_steps(db)}
    parked = PostbackLogStore(db.connection()).count_parked()
    pending_deliveries = DeliveryStore(db.connection()).pending_count()
    status["postbacks"] = {"parked": parked, "outbound_pending": pending_deliveries}
    status["alerts"] = alert_summary(db)  # docs/alerts.md
    status["nodes"] = node_rows(clicks.nodes(), time.time())
    return status


def outage_spool_status(settings: Settings) -> dict[str, Any]:
    """The spool while the database does not answer: the clicks waiting in it and the oldest one's age,
    counted from where the flusher last said it had landed (workers/runtime/spoolwatch.py), and the
    clicks refused ever (a full disk)."""
    from models.clicks.refusals import read_refused
    from workers.runtime.spoolwatch import SpoolWatch

    watch = SpoolWatch(settings.spool_dir, settings.data_dir)
    try:
        refused, refused_at = read_refused(settings.spool_dir)
        shown = watch.status(None, refused_at / 1000)
    finally:
        watch.close()
    shown["refused_clicks"] = refused
    return shown


def node_rows(nodes: list[tuple], now: float) -> list[dict[str, Any]]:
    """Every node's row (cluster mode has one per host): its last heartbeat and how far it has landed."""
    rows = []
    for name, host, heartbeat_at, landed_at, segment, offset, pending, backlog_ms in nodes:
        rows.append(
            {
                "node": name,
                "host": host,
                "heartbeat_s_ago": round(now - heartbeat_at / 1000, 1) if heartbeat_at else None,
                "last_flush_s_ago": round(now - landed_at / 1000, 1) if landed_at else None,
                "position": f"{segment}:{offset}",
                "unlanded_bytes": pending,
                "backlog_s": None if backlog_ms is None else round(backlog_ms / 1000, 1),
            }
        )
    return rows


def database_status(settings: Settings, db: Database) -> dict[str, Any]:
    """Where the database is and how big: the SQLite file and its WAL, or the PostgreSQL database."""
    if settings.uses_postgres:
        from models.store.maintenance import MaintenanceStore  # Its PostgreSQL sibling, by connection.

        return {
            "url": settings.database_shown,
            "size_bytes": MaintenanceStore(db.connection()).database_bytes(),
        }
    database = settings.database_path
    return {
        "path": str(database),
        "size_bytes": _file_bytes(database),
        "wal_bytes": _file_bytes(database.with_name(database.name + "-wal")),
    }


def bot_ranges_status(path: Path | None) -> dict[str, Any]:
    """Which crawler ranges file the bot decision reads, and how old its lists are."""
    from models.lookups.crawlerranges import RangeData, RangeDataError, ranges_file

    if path is None:
        return {"off": "LANNER_BOT_RANGES=off"}
    in_use = ranges_file(path)
    try:
        data = RangeData.read(in_use)
    except RangeDataError as exc:
        return {"path": str(in_use), "error": str(exc)}
    return {
        "path": str(in_use),
        "updated_at": data.updated_at,
        "oldest_source": data.oldest_fetch,
        "sources": len(data.sources),
        "networks": data.network_count,
    }


def geo_status(settings: Settings, now: float | None = None) -> dict[str, Any]:
    """Which geo files routing reads, what they are and how old their data is (a warning past
    STALE_AFTER_DAYS), where updates come from; never the licence key, only whether it is set."""
    from models.lookups.geoupdate import STALE_AFTER_DAYS

    update = "run `lanner geo update`"
    stale_fix = update if settings.geo_source else "set LANNER_GEO_SOURCE for updates"
    missing_fix = update if settings.geo_source else "run `lanner geo build`"
    status = _geo_file_status(settings.geo_path, now, STALE_AFTER_DAYS, missing_fix, stale_fix)
    status["source"] = settings.geo_source or "bundled (no updates: set LANNER_GEO_SOURCE)"
    if settings.geo_source == "maxmind":
        status["licence_key"] = "set" if settings.maxmind_license_key else "NOT SET"
    missing_fix = update if settings.geo_source else "put the file there"
    networks = {
        path.stem: _geo_file_status(path, now, STALE_AFTER_DAYS, missing_fix, stale_fix)
        for path in settings.geo_network_paths
    }
    if networks:
        status["network"] = networks
    return status


def _geo_file_status(
    path: Path, now: float | None, stale_days: int, missing_fix: str, stale_fix: str
) -> dict[str, Any]:
    from models.lookups.geo import GeoDatabaseError, open_geo_database

    try:
        database = open_geo_database(path)
    except GeoDatabaseError as exc:
        return {"path": str(path), "error": str(exc)}
    if database is None:
        return {"path": str(path), "missing": missing_fix}
    try:
        age_days = int(((time.time() if now is None else now) - database.data_date.timestamp()) // 86400)
        status: dict[str, Any] = {
            "path": str(path),
            "about": database.description,
            "data_date": database.data_date.date().isoformat(),
            "age_days": age_days,
        }
        if age_days > stale_days:
            status["warning"] = f"geo data is {age_days} days old (over {stale_days}): {stale_fix}"
        return status
    finally:
        database.close()
