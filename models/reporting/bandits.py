"""The background half of smart rotation: each bandit stream's numbers per offer (or lander), its
shares, stored.

A minutely Huey task (workers/runtime/tasks.py `refresh_bandits`) reads, for every active stream whose
offer rotation is bandit_cr or bandit_epc, the clicks, conversions (leads and sales: a rebill is not a
click converting again) and revenue of each of its open offers over the last WINDOW_DAYS (one report
over the rollups, grouped by stream and offer), turns them into shares (models/routing/bandit.py) and
replaces the `bandit_share` rows with them in one transaction that moves `bandit_version`; each web
worker reloads the shares within BANDIT_CHECK_EVERY (models/clicks/tracker.py). The click path never
asks the database for them.

A stream whose lander_rotation is bandit_cr or bandit_epc gets the same for its open landers (active,
weight above 0), into `bandit_lander_share` in the same transaction: its numbers per lander from the same
report (grouped by stream and lander: no rollup keeps the lander, so the columnar history where this
node keeps one, else the row store's clicks of the window), where bandit_cr's "conversion" is the click
going on from the lander to the offer (lp_clicks: its LP CTR), and bandit_epc's the lead or sale and its
revenue.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from peewee import Database

from models.reporting.history import HistoryFiles
from models.reporting.reports import ReportQuery, run_report
from models.routing.bandit import (
    BANDIT_CR,
    BANDIT_EPC,
    BANDIT_ROTATIONS,
    ArmStats,
    best_probabilities,
    shares,
)
from models.store.bandit import BanditStore
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Stream, StreamOffer
from models.tables.lander import Lander, StreamLander
from models.tables.offer import Offer

WINDOW_DAYS = 14  # Long enough for late postbacks; short enough that an offer gone stale is noticed.


@dataclass(frozen=True)
class StreamShares:
    stream_id: int
    metric: str
    arms: list[tuple[ArmStats, float, float]]  # (numbers, probability of being best, share)


def bandit_streams(db: Database) -> dict[int, tuple[str, list[int]]]:
    """stream id -> (its rotation, its open offers: active, weight above 0) of every bandit stream."""
    return _open_arms(Stream.offer_rotation, StreamOffer, Offer)


def lander_bandit_streams(db: Database) -> dict[int, tuple[str, list[int]]]:
    """stream id -> (its lander rotation, its open landers) of every stream rotating landers by a
    bandit and having one open lander at least (a stream without any has no lander share to keep)."""
    streams = _open_arms(Stream.lander_rotation, StreamLander, Lander)
    return {stream_id: value for stream_id, value in streams.items() if value[1]}


def _open_arms(rotation, link_model, arm_model) -> dict[int, tuple[str, list[int]]]:
    """stream id -> (its `rotation`, its arms open in `link_model`: the link and the arm active, the
    weight above 0) of every active stream whose `rotation` is a bandit."""
    bandits = Stream.select(Stream.id, rotation).where(
        Stream.status == "active", rotation.in_(sorted(BANDIT_ROTATIONS))
    )
    streams: dict[int, tuple[str, list[int]]] = {
        stream_id: (rotation_name, [])
        for stream_id, rotation_name in cast("Iterable[tuple[int, str]]", bandits.tuples())
    }
    if not streams:
        return {}
    arm_column = getattr(link_model, arm_model.__name__.lower())
    links = (
        link_model.select(link_model.stream, arm_column)
        .join(arm_model)
        .where(
            link_model.stream.in_(list(streams)),
            link_model.status == "active",
            link_model.weight > 0,
            arm_model.status == "active",
        )
        .order_by(link_model.id)
        .tuples()
    )
    for stream_id, arm_id in links:
        streams[stream_id][1].append(arm_id)
    return streams


def arm_numbers(
    db: Database, stream_ids: list[int], since: str, *, now: float, history: HistoryFiles | None = None
) -> dict[tuple[int, int], ArmStats]:
    """(stream id, offer id) -> its clicks, conversions and revenue from `since` (a UTC date) on."""
    return {
        key: ArmStats(key[1], row["clicks"], row["leads"] + row["sales"], row["revenue"])
        for key, row in _report_rows(db, "offer", stream_ids, since, now=now, history=history).items()
    }


def lander_numbers(
    db: Database, stream_ids: list[int], since: str, *, now: float, history: HistoryFiles | None = None
) -> dict[str, dict[tuple[int, int], ArmStats]]:
    """metric -> (stream id, lander id) -> its numbers from `since` on: for bandit_cr the clicks that
    went on to the offer as its conversions (its LP CTR), for bandit_epc its leads and sales and revenue."""
    by_ctr, by_sale = {}, {}
    for key, row in _report_rows(db, "lander", stream_ids, since, now=now, history=history).items():
        by_ctr[key] = ArmStats(key[1], row["clicks"], min(row["lp_clicks"], row["clicks"]), 0.0)
        by_sale[key] = ArmStats(key[1], row["clicks"], row["leads"] + row["sales"], row["revenue"])
    return {BANDIT_CR: by_ctr, BANDIT_EPC: by_sale}


def _report_rows(
    db: Database,
    arm_kind: str,
    stream_ids: list[int],
    since: str,
    *,
    now: float,
    history: HistoryFiles | None = None,
) -> dict[tuple[int, int], dict]:
    report = run_report(
        db,
        ReportQuery(
            group_by=("stream", arm_kind),
            filters={"stream": tuple(str(stream_id) for stream_id in stream_ids)},
            since=since,
        ),
        now=now,
        history=history,
    )
    return {
        (row["stream"], row[arm_kind]): row
        for row in report.rows
        if row["stream"] is not None and row[arm_kind] is not None
    }


def _since(now: float) -> str:
    return (datetime.fromtimestamp(now, UTC).date() - timedelta(days=WINDOW_DAYS - 1)).isoformat()


def _stream_shares(
    streams: dict[int, tuple[str, list[int]]],
    numbers: dict[str, dict[tuple[int, int], ArmStats]],
    rng: random.Random,
) -> list[StreamShares]:
    result = []
    for stream_id, (metric, arm_ids) in sorted(streams.items()):
        known = numbers[metric]
        arms = [known.get((stream_id, arm_id)) or ArmStats(arm_id, 0, 0, 0.0) for arm_id in arm_ids]
        probabilities = best_probabilities(arms, metric, rng)
        arm_shares = shares(probabilities)
        result.append(
            StreamShares(
                stream_id, metric, [(arm, probabilities[arm.arm_id], arm_shares[arm.arm_id]) for arm in arms]
            )
        )
    return result


def compute_shares(
    db: Database,
    *,
    now: float | None = None,
    rng: random.Random | None = None,
    history: HistoryFiles | None = None,
) -> list[StreamShares]:
    """Every offer bandit stream's shares from its numbers now (nothing written)."""
    now = time.time() if now is None else now
    streams = bandit_streams(db)
    if not streams:
        return []
    numbers = arm_numbers(db, sorted(streams), _since(now), now=now, history=history)
    return _stream_shares(streams, {BANDIT_CR: numbers, BANDIT_EPC: numbers}, rng or random.Random())


def compute_lander_shares(
    db: Database,
    *,
    now: float | None = None,
    rng: random.Random | None = None,
    history: HistoryFiles | None = None,
) -> list[StreamShares]:
    """Every lander bandit stream's shares from its numbers now (nothing written)."""
    now = time.time() if now is None else now
    streams = lander_bandit_streams(db)
    if not streams:
        return []
    numbers = lander_numbers(db, sorted(streams), _since(now), now=now, history=history)
    return _stream_shares(streams, numbers, rng or random.Random())


def _rows(computed: list[StreamShares], now_ms: int) -> list[tuple]:
    return [
        (s.stream_id, arm.arm_id, arm.clicks, arm.conversions, arm.revenue, probability, share, now_ms)
        for s in computed
        for arm, probability, share in s.arms
    ]


def refresh_bandits(
    db: Database,
    *,
    now: float | None = None,
    rng: random.Random | None = None,
    history: HistoryFiles | None = None,
) -> int:
    """Recompute and store every bandit stream's shares (offers and landers); the number of streams
    refreshed (a stream rotating both counts twice). `history`: the columnar history's files, which
    the landers' numbers are read from (no rollup keeps the lander); None reads the row store."""
    now = time.time() if now is None else now
    rng = rng or random.Random()
    computed = compute_shares(db, now=now, rng=rng, history=history)
    computed_landers = compute_lander_shares(db, now=now, rng=rng, history=history)
    if not computed and not computed_landers:
        store = BanditStore(db.connection())
        if not store.shares() and not store.lander_shares():
            return 0  # No bandit stream, none to forget: no write a minute for nothing.
    now_ms = int(now * 1000)
    with write_tx(db):
        conn = db.connection()
        store = BanditStore(conn)
        store.replace(_rows(computed, now_ms))
        store.replace_landers(_rows(computed_landers, now_ms))
        MetaStore(conn).move_bandit_version(str(now_ms))
    return len(computed) + len(computed_landers)


def stream_shares(db: Database, stream_id: int, arm_kind: str = "offer") -> list[dict]:
    """The stored state of one stream's offers (or landers): empty until a refresh has seen it in a
    bandit rotation."""
    store = BanditStore(db.connection())
    stored = store.lander_stream(stream_id) if arm_kind == "lander" else store.stream(stream_id)
    return [
        {
            arm_kind: arm_id,
            "clicks": clicks,
            "conversions": conversions,
            "revenue": round(revenue, 6),
            "best_probability": round(best, 4),
            "share": round(share, 4),
            "updated_at": updated_at,
        }
        for arm_id, clicks, conversions, revenue, best, share, updated_at in stored
    ]
