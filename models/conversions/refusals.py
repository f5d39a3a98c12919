"""Postbacks refused before their key was known to be right: bounded counters, not a log row each.

Anyone can send these, so what they may write is bounded: one row per (UTC day, source address),
at most `MAX_ADDRESSES_PER_DAY` addresses a day (the rest share one row, `other`), each with its
count and one sample of what was sent (key masked, truncated). The sample is replaced only by the
first `SAMPLES_PER_HOUR` refusals of an address in an hour. Rows go with the postback log
(models/ops/retention.py, `LANNER_POSTBACK_LOG_DAYS`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from peewee import Database

from models.conversions.postbacks import storable
from models.store.database import write_tx
from models.store.refusals import RefusalStore

MAX_ADDRESSES_PER_DAY = 1000
SAMPLES_PER_HOUR = 5
SAMPLE_CHARS = 300
OTHER_ADDRESSES = "other"
HOUR_MS = 3_600_000


def utc_day(ms: int) -> int:
    """20261201 for a time on 2026-12-01 UTC: the counters' day."""
    return int(datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y%m%d"))


class RefusalCounter:
    """Counts refused postbacks on this process's connection."""

    def __init__(
        self,
        db: Database,
        *,
        clock=time.time,
        max_addresses: int = MAX_ADDRESSES_PER_DAY,
        samples_per_hour: int = SAMPLES_PER_HOUR,
    ) -> None:
        self.db = db
        self.clock = clock
        self.max_addresses = max_addresses
        self.samples_per_hour = samples_per_hour

    def count(self, remote_ip: str, sample: str) -> None:
        now = int(self.clock() * 1000)
        with write_tx(self.db):
            RefusalStore(self.db.connection()).count(
                day=utc_day(now),
                remote_ip=storable(remote_ip[:64]),
                other=OTHER_ADDRESSES,
                max_addresses=self.max_addresses,
                now_ms=now,
                hour=now // HOUR_MS,
                sample=storable(sample[:SAMPLE_CHARS]),
                samples_per_hour=self.samples_per_hour,
            )
