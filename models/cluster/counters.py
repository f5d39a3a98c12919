"""A node's cap counters in cluster mode: its own counts, what Redis last said, and its unlanded clicks.

The single box's ClickCounters (models/routing/caps.py) are exact because every click of the box is in
its journal. Several nodes each see only their own journal, so a count here is a lower bound of the
cluster's. A stream or offer whose caps the worker holds lease units of (models/cluster/leases.py) is
open: those clicks are reserved for it. Without units, it is capped when this node's count reaches the
cap, or when Redis last answered that every unit of a cap is taken (leased or spent), which the router
then avoids without asking again for FULL_RECHECK seconds (a clean stop may give units back meanwhile).
While Redis cannot be reached (until it is asked again, a second later), a capped stream or offer is
open only as far as the worker's leases go: a node alone cannot know how much of a cap the others have
used, so it sends none of it beyond its own units (never over a cap; under it meanwhile).

It also keeps this node's clicks not landed yet, per key, to seed a cap key Redis lost
(`unlanded`): in buckets of one refresh (~0.25 s) each, dropped once the flushed position passes the
journal's end as it was when the bucket closed. A bucket landed in part counts whole: a seed errs high.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.routing.caps import ClickCounters

if TYPE_CHECKING:
    from models.cluster.shared_state import SharedState

MAX_BUCKETS = 240  # A minute of refreshes; beyond it (a stalled flusher) the oldest two merge.
FULL_RECHECK = 1.0  # Seconds a cap Redis said is full counts as full before a lease is asked for again.
MAX_SHARED_DAYS = 4096  # Redis's day counts remembered (YYYYMMDD - 3 across a month start keeps fewer).


class SharedCounters(ClickCounters):
    """ClickCounters that also believe the worker's leases and Redis's counts, and refuse every cap the
    leases do not cover while Redis is away."""

    def __init__(self, shared: SharedState) -> None:
        super().__init__()
        self.shared = shared
        self.shared_totals: dict[tuple[str, int], int] = {}
        self.shared_days: dict[tuple[str, int, int], int] = {}
        # When (shared.clock) Redis last said a key is full: a full key is believed for FULL_RECHECK.
        self.full_at: dict[tuple[str, int, int | None], float] = {}
        # [(journal end when closed, {(scope, id, day): clicks})], oldest first; the last one is open.
        self.buckets: list[tuple[tuple[int, int] | None, dict[tuple[str, int, int], int]]] = [(None, {})]

    def add(self, scope: str, ref: int, day: int) -> None:
        super().add(scope, ref, day)
        counts = self.buckets[-1][1]
        key = (scope, ref, day)
        counts[key] = counts.get(key, 0) + 1

    def is_capped(self, scope: str, ref: int, daily_cap: int | None, total_cap: int | None, day: int) -> bool:
        if super().is_capped(scope, ref, daily_cap, total_cap, day):
            return True
        leases = self.shared.leases
        has_day = daily_cap is None or leases.units((scope, ref, day)) > 0
        has_total = total_cap is None or leases.units((scope, ref, None)) > 0
        if has_day and has_total:
            return False  # Reserved for this worker: no need to ask.
        if self.shared.is_alone:
            return True
        now = self.shared.clock()
        if (
            not has_total
            and total_cap is not None
            and self.shared_totals.get((scope, ref), 0) >= total_cap
            and now - self.full_at.get((scope, ref, None), now) < FULL_RECHECK
        ):
            return True
        return (
            not has_day
            and daily_cap is not None
            and self.shared_days.get((scope, ref, day), 0) >= daily_cap
            and now - self.full_at.get((scope, ref, day), now) < FULL_RECHECK
        )

    def learn(self, scope: str, ref: int, day: int | None, count: int, cap: int | None = None) -> None:
        """What Redis counts as taken of a key (day None: the total); `cap`: the key's, to note when it
        was found full."""
        if cap is not None and count >= cap:
            if len(self.full_at) >= MAX_SHARED_DAYS:
                self.full_at.clear()  # Only re-learnt at the next lease.
            self.full_at[(scope, ref, day)] = self.shared.clock()
        if day is None:
            self.shared_totals[(scope, ref)] = count
            return
        days = self.shared_days
        if len(days) >= MAX_SHARED_DAYS:  # Years of days: keep the last few (a lost one is only re-learnt).
            self.shared_days = days = {key: n for key, n in days.items() if key[2] >= day - 3}
        days[(scope, ref, day)] = count

    def close_bucket(self, journal_end: tuple[int, int], flushed: tuple[int, int]) -> None:
        """Close the open bucket at the journal's end and forget the buckets landed by `flushed`."""
        end, counts = self.buckets[-1]
        if counts:
            self.buckets[-1] = (journal_end, counts)
            self.buckets.append((None, {}))
        self.buckets = [b for b in self.buckets if b[0] is None or b[0] > flushed]
        if len(self.buckets) > MAX_BUCKETS:
            (_, older), (end, newer) = self.buckets[0], self.buckets[1]
            for key, clicks in older.items():
                newer[key] = newer.get(key, 0) + clicks
            self.buckets[:2] = [(end, newer)]

    def unlanded(self, scope: str, ref: int, day: int | None) -> int:
        """This node's clicks on the key not landed yet (day None: on any day), erring high."""
        return sum(
            clicks
            for _, counts in self.buckets
            for (s, r, d), clicks in counts.items()
            if s == scope and r == ref and (day is None or d == day)
        )
