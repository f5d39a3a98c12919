"""The background half of smart rotation: each bandit stream's numbers per offer, its shares, stored.

A minutely Huey task (workers/runtime/tasks.py `refresh_bandits`) reads, for every active stream whose
offer rotation is bandit_cr or bandit_epc, the clicks, conversions (leads and sales: a rebill is not a
click converting again) and revenue of each of its open offers over the last WINDOW_DAYS (one report
over the rollups, grouped by stream and offer), turns them into shares (models/routing/bandit.py) and
replaces the `bandit_share` rows with them in one transaction that moves `bandit_version`; each web
worker reloads the shares within BANDIT_CHECK_EVERY (models/clicks/tracker.py). The click path never
asks the database for them.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from peewee import Database

from models.reporting.reports import ReportQuery, run_report
from models.routing.bandit import BANDIT_ROTATIONS, ArmStats, best_probabilities, shares
from models.store.bandit import BanditStore
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Stream, StreamOffer
from models.tables.offer import Offer

WINDOW_DAYS = 14  # Long enough for late postbacks; short enough that an offer gone stale is noticed.


@dataclass(frozen=True)
class StreamShares:
    stream_id: int
    metric: str
    arms: list[tuple[ArmStats, float, float]]  # (numbers, probability of being best, share)


def bandit_streams(db: Database) -> dict[int, tuple[str, list[int]]]:
    """stream id -> (its rotation, its open offers: active, weight above 0) of every bandit stream."""
    streams: dict[int, tuple[str, list[int]]] = {
        stream.id: (stream.offer_rotation, [])
        for stream in Stream.select(Stream.id, Stream.offer_rotation).where(
            Stream.status == "active", Stream.offer_rotation.in_(sorted(BANDIT_ROTATIONS))
        )
    }
    if not streams:
        return {}
    links = (
        StreamOffer.select(StreamOffer.stream, StreamOffer.offer)
        .join(Offer)
        .where(
            StreamOffer.stream.in_(list(streams)),
            StreamOffer.status == "active",
            StreamOffer.weight > 0,
            Offer.status == "active",
        )
        .order_by(StreamOffer.id)
    )
    for link in links:
        streams[link.stream_id][1].append(link.offer_id)
    return streams


def arm_numbers(
    db: Database, stream_ids: list[int], since: str, *, now: float
) -> dict[tuple[int, int], ArmStats]:
    """(stream id, offer id) -> its clicks, conversions and revenue from `since` (a UTC date) on."""
    report = run_report(
        db,
        ReportQuery(
            group_by=("stream", "offer"),
            filters={"stream": tuple(str(stream_id) for stream_id in stream_ids)},
            since=since,
        ),
        now=now,
    )
    numbers = {}
    for row in report.rows:
        if row["stream"] is None or row["offer"] is None:
            continue
        numbers[row["stream"], row["offer"]] = ArmStats(
            row["offer"], row["clicks"], row["leads"] + row["sales"], row["revenue"]
        )
    return numbers


def compute_shares(
    db: Database, *, now: float | None = None, rng: random.Random | None = None
) -> list[StreamShares]:
    """Every bandit stream's shares from its numbers now (nothing written)."""
    now = time.time() if now is None else now
    rng = rng or random.Random()
    streams = bandit_streams(db)
    if not streams:
        return []
    since = (datetime.fromtimestamp(now, UTC).date() - timedelta(days=WINDOW_DAYS - 1)).isoformat()
    numbers = arm_numbers(db, sorted(streams), since, now=now)
    result = []
    for stream_id, (metric, offer_ids) in sorted(streams.items()):
        arms = [numbers.get((stream_id, offer_id)) or ArmStats(offer_id, 0, 0, 0.0) for offer_id in offer_ids]
        probabilities = best_probabilities(arms, metric, rng)
        arm_shares = shares(probabilities)
        result.append(
            StreamShares(
                stream_id, metric, [(arm, probabilities[arm.arm_id], arm_shares[arm.arm_id]) for arm in arms]
            )
        )
    return result


def refresh_bandits(db: Database, *, now: float | None = None, rng: random.Random | None = None) -> int:
    """Recompute and store every bandit stream's shares; the number of streams refreshed."""
    now = time.time() if now is None else now
    computed = compute_shares(db, now=now, rng=rng)
    if not computed and not BanditStore(db.connection()).shares():
        return 0  # No bandit stream, none to forget: no write a minute for nothing.
    now_ms = int(now * 1000)
    rows = [
        (s.stream_id, arm.arm_id, arm.clicks, arm.conversions, arm.revenue, probability, share, now_ms)
        for s in computed
        for arm, probability, share in s.arms
    ]
    with write_tx(db):
        conn = db.connection()
        BanditStore(conn).replace(rows)
        MetaStore(conn).move_bandit_version(str(now_ms))
    return len(computed)


def stream_shares(db: Database, stream_id: int) -> list[dict]:
    """The stored state of one stream (empty until a refresh has seen it in a bandit rotation)."""
    return [
        {
            "offer": offer_id,
            "clicks": clicks,
            "conversions": conversions,
            "revenue": round(revenue, 6),
            "best_probability": round(best, 4),
            "share": round(share, 4),
            "updated_at": updated_at,
        }
        for offer_id, clicks, conversions, revenue, best, share, updated_at in BanditStore(
            db.connection()
        ).stream(stream_id)
    ]
