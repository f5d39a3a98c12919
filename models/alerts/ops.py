"""Operations alerts: what the worker checks every LANNER_ALERT_CHECK_MINUTES, and the messages it sends
the operations channels when a condition starts and when it clears (never at every check).

- spool backlog: the oldest click not in the database yet is older than LANNER_BACKLOG_ALERT_SECONDS
  (the age `lanner status` and /healthz judge by: models/clicks/backlog.py);
- consumer down: a node's flusher has written no heartbeat to the database for
  LANNER_ALERT_CONSUMER_SECONDS (every `lanner worker` beats every 5 s: the `nodes` of `lanner status`);
  on one box the worker cannot tell of its own death, so `lanner alert check` from a timer can;
- disk nearly full: less than LANNER_ALERT_DISK_FREE_PERCENT free where the data directory is;
- certificate expiring: a domain's certificate (the expiry certbot's file says, as `lanner domain`
  recorded it) expires within LANNER_ALERT_CERT_DAYS; certbot renews at 30 days, so this is renewal failing;
- conversion API failing: a platform connection's events failed LANNER_ALERT_PLATFORM_FAILURES times or
  more within the hour, with none sent since.

Each condition's state is a row of `ops_alert_state` (firing or not, since when); a change queues one
message per operations channel, keyed by the condition and when it started, so it is queued once.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peewee import Database, IntegrityError, fn

from models.alerts.delivery import ops_channel_ids, queue_alert
from models.clicks.backlog import backlog_age
from models.store.clicks import ClickStore
from models.store.database import write_tx
from models.tables.alerts import Alert, OpsAlertState
from models.tables.conversion import PlatformConnection, PostbackDelivery
from models.tables.domain import Domain

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True)
class Thresholds:
    backlog_seconds: float
    consumer_seconds: float
    disk_free_percent: float
    cert_days: float
    platform_failures: int


@dataclass(frozen=True)
class Verdict:
    name: str  # spool_backlog:<node>, consumer:<node>, disk:<node>, certificate:<domain>, platform:<name>
    is_firing: bool
    title: str  # What it is, firing: "Disk nearly full on node a".
    detail: str  # The numbers now.


def check_backlog(db: Database, spool_dir: Path, node: str, limit: float, now: float) -> Verdict:
    lag = backlog_age(db, spool_dir, now)
    age = 0.0 if lag is None else lag
    return Verdict(
        f"spool_backlog:{node}",
        age > limit,
        f"Click spool backlog on node {node}",
        f"the oldest click not in the database yet is {age:.0f} s old (alert over {limit:.0f} s)",
    )


def check_consumers(db: Database, limit: float, now: float) -> list[Verdict]:
    verdicts = []
    for name, host, heartbeat_at, *_ in ClickStore(db.connection()).nodes():
        if not heartbeat_at:
            continue  # A node that never ran a worker (0 or NULL): nothing to miss.
        ago = now - heartbeat_at / 1000
        verdicts.append(
            Verdict(
                f"consumer:{name}",
                ago > limit,
                f"Consumer down on node {name} ({host})",
                f"its flusher's last heartbeat was {ago:.0f} s ago (alert over {limit:.0f} s)",
            )
        )
    return verdicts


def check_disk(path: Path, node: str, limit: float) -> Verdict:
    usage = shutil.disk_usage(path)
    free = 100.0 * usage.free / usage.total if usage.total else 100.0
    return Verdict(
        f"disk:{node}",
        free < limit,
        f"Disk nearly full on node {node}",
        f"{free:.1f}% free ({usage.free // 2**20} MiB) where {path} is (alert under {limit:g}%)",
    )


def check_certificates(db: Database, days: float, now: float) -> list[Verdict]:
    verdicts = []
    query = Domain.select().where((Domain.is_https == 1) & Domain.cert_expires_at.is_null(False))
    for domain in query.order_by(Domain.name):
        left = ((domain.cert_expires_at or 0) - now * 1000) / DAY_MS
        verdicts.append(
            Verdict(
                f"certificate:{domain.name}",
                domain.status == "active" and left < days,
                f"Certificate of {domain.name} expiring",
                f"it expires in {left:.1f} days (alert under {days:g}); certbot renews at 30: see "
                f"`lanner domain list`{' (' + domain.cert_error[:200] + ')' if domain.cert_error else ''}",
            )
        )
    return verdicts


def check_platforms(db: Database, failures: int, now: float) -> list[Verdict]:
    since = int(now * 1000) - HOUR_MS
    verdicts = []
    for connection in PlatformConnection.select().where(PlatformConnection.status == "active"):
        mine = PostbackDelivery.connection_id == connection.id
        failed, last_failed, error = (
            PostbackDelivery.select(
                fn.SUM(PostbackDelivery.attempts),
                fn.MAX(PostbackDelivery.updated_at),
                fn.MAX(PostbackDelivery.error),
            )
            .where(
                mine
                & (PostbackDelivery.state != "sent")
                & (PostbackDelivery.error != "")
                & (PostbackDelivery.updated_at >= since)
            )
            .scalar(as_tuple=True)
        )
        last_sent = (
            PostbackDelivery.select(fn.MAX(PostbackDelivery.updated_at))
            .where(mine & (PostbackDelivery.state == "sent"))
            .scalar()
        )
        is_failing = bool(failed) and failed >= failures and (last_sent or 0) < (last_failed or 0)
        verdicts.append(
            Verdict(
                f"platform:{connection.name}",
                is_failing,
                f"Conversion API failing: {connection.platform} connection {connection.name}",
                f"{failed or 0} failed attempt(s) within the hour, none sent since"
                + (f"; the last said: {error[:200]}" if is_failing and error else "")
                if is_failing
                else "events are sent again",
            )
        )
    return verdicts


@dataclass
class Change:
    verdict: Verdict
    since: int  # When the condition started (UTC ms).
    alert_ids: list[int]


# Checks whose every subject each run names (all domains, connections, nodes' heartbeats): one firing
# that a run no longer names (a domain removed) clears. A node's own checks (its spool, its disk) are
# named by that node's runs only.
ENUMERATED = ("certificate", "platform", "consumer")


def record_verdicts(db: Database, verdicts: list[Verdict], *, now: float | None = None) -> list[Change]:
    """Store each condition's state; for each that started or cleared, queue one message to every
    operations channel. A condition first seen clear says nothing."""
    now_ms = int((time.time() if now is None else now) * 1000)
    changes = []
    with write_tx(db):
        states = {row.name: row for row in OpsAlertState.select()}
        channels = ops_channel_ids(db)
        named = {verdict.name for verdict in verdicts}
        gone = [
            Verdict(name, False, _title_of(name), "it is no longer checked (removed)")
            for name, row in states.items()
            if row.is_firing and name not in named and name.split(":")[0] in ENUMERATED
        ]
        for verdict in [*verdicts, *gone]:
            state = states.get(verdict.name)
            was_firing = bool(state and state.is_firing)
            if state is None:
                try:
                    with db.atomic():  # A savepoint: another node's check may have stored it meanwhile.
                        state = OpsAlertState.create(
                            name=verdict.name,
                            is_firing=int(verdict.is_firing),
                            since=now_ms,
                            detail=verdict.detail,
                            checked_at=now_ms,
                        )
                except IntegrityError:
                    continue  # That node told of it.
                if not verdict.is_firing:
                    continue
            elif was_firing == verdict.is_firing:
                OpsAlertState.update(detail=verdict.detail, checked_at=now_ms).where(
                    OpsAlertState.name == verdict.name
                ).execute()
                continue
            started = now_ms if verdict.is_firing else state.since
            OpsAlertState.update(
                is_firing=int(verdict.is_firing), since=now_ms, detail=verdict.detail, checked_at=now_ms
            ).where(OpsAlertState.name == verdict.name).execute()
            word = "started" if verdict.is_firing else "cleared"
            title = f"{verdict.title}: {word}" if verdict.is_firing else f"Cleared: {verdict.title}"
            ids = []
            for channel_id in channels:
                alert_id = queue_alert(
                    db,
                    channel_id,
                    f"ops:{verdict.name}:{started}:{word}",
                    "ops",
                    title,
                    verdict.detail[0].upper() + verdict.detail[1:] + ".",
                    {
                        "check": verdict.name,
                        "state": "firing" if verdict.is_firing else "clear",
                        "since": started,
                    },
                    now_ms=now_ms,
                )
                if alert_id is not None:
                    ids.append(alert_id)
            changes.append(Change(verdict, started, ids))
    return changes


def _title_of(name: str) -> str:
    family, _, subject = name.partition(":")
    return {
        "certificate": f"Certificate of {subject} expiring",
        "platform": f"Conversion API failing: connection {subject}",
        "consumer": f"Consumer down on node {subject}",
    }.get(family, name)


def ops_states(db: Database) -> list[dict]:
    """Each condition's last verdict, firing ones first."""
    query = OpsAlertState.select().order_by(OpsAlertState.is_firing.desc(), OpsAlertState.name)
    return [
        {"check": row.name, "firing": bool(row.is_firing), "since": row.since, "detail": row.detail}
        for row in query
    ]


def check_all(
    db: Database,
    *,
    spool_dir: Path,
    data_dir: Path,
    node: str,
    thresholds: Thresholds,
    now: float,
    is_local: bool = True,
    is_shared: bool = True,
) -> list[Verdict]:
    """The operations checks' verdicts now: this node's own (its spool, its disk) if `is_local`, the
    install's (heartbeats, certificates, conversion APIs) if `is_shared`."""
    verdicts = []
    if is_local:
        verdicts += [
            check_backlog(db, spool_dir, node, thresholds.backlog_seconds, now),
            check_disk(data_dir, node, thresholds.disk_free_percent),
        ]
    if is_shared:
        verdicts += [
            *check_consumers(db, thresholds.consumer_seconds, now),
            *check_certificates(db, thresholds.cert_days, now),
            *check_platforms(db, thresholds.platform_failures, now),
        ]
    return verdicts


def alert_summary(db: Database) -> dict[str, Any]:
    """What `lanner status` shows: the operations checks firing, the alerts waiting and given up."""
    firing = [row["check"] for row in ops_states(db) if row["firing"]]
    return {
        "firing": ", ".join(firing) or "none",
        "pending": Alert.select().where(Alert.state == "pending").count(),
        "failed": Alert.select().where(Alert.state == "failed").count(),
    }
