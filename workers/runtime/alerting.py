"""What the worker does about alerts: the operations checks with this install's thresholds, and the log
lines of what they found. The Huey tasks that call it are in workers/runtime/tasks.py; `lanner alert
check` calls it too."""

from __future__ import annotations

import logging
import time

from peewee import Database

from models.alerts.ops import Change, Thresholds, check_all, record_verdicts
from models.clicks.node import spool_node
from settings import Settings

logger = logging.getLogger(__name__)


def thresholds_of(settings: Settings) -> Thresholds:
    return Thresholds(
        backlog_seconds=settings.backlog_alert_seconds,
        consumer_seconds=settings.alert_consumer_seconds,
        disk_free_percent=settings.alert_disk_free_percent,
        cert_days=settings.alert_cert_days,
        platform_failures=settings.alert_platform_failures,
    )


def run_ops_checks(
    settings: Settings,
    db: Database,
    *,
    now: float | None = None,
    is_local: bool = True,
    is_shared: bool = True,
) -> list[Change]:
    """Check now (this node's spool and disk if `is_local`, the install's shared conditions if
    `is_shared`); the conditions that started or cleared (their alerts queued)."""
    now = time.time() if now is None else now
    verdicts = check_all(
        db,
        spool_dir=settings.spool_dir,
        data_dir=settings.data_dir,
        node=spool_node(settings.spool_dir).name,
        thresholds=thresholds_of(settings),
        now=now,
        is_local=is_local,
        is_shared=is_shared,
    )
    changes = record_verdicts(db, verdicts, now=now)
    for change in changes:
        level = logging.WARNING if change.verdict.is_firing else logging.INFO
        logger.log(
            level,
            "ops alert %s %s: %s",
            change.verdict.name,
            "started" if change.verdict.is_firing else "cleared",
            change.verdict.detail,
        )
    return changes
