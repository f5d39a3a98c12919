"""A node's cap counters in cluster mode: its own counts, what Redis last said, and its unlanded clicks.

The single box's ClickCounters (models/routing/caps.py) are exact because every click of the box is in
its journal. Several nodes each see only their own journal, so a count here is a lower bound of the
cluster's; what Redis last answered for a cap key (models/cluster/shared_state.py) is another. A stream
or offer is capped when either reaches the cap, so the router avoids what Redis refused without asking
again. While Redis cannot be reached (until it is asked again, a second later), every capped stream and
offer counts as capped: a node alone cannot know how much of a cap the others have used, so it sends
none of it (never over a cap; under it meanwhile).

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
MAX_SHARED_DAYS = 4096  # Redis's day counts remembered (YYYYMMDD - 3 across a month start keeps fewer).


class SharedCounters(ClickCounters):
    """ClickCounters that also believe Redis's counts and refuse every cap while Redis is away."""

    def __init__(self, shared: SharedState) -> None:
        super().__init__()
        self.shared = shared
        self.shared_totals: dict[tuple[str, int], int] = {}
        self.shared_days: dict[tuple[str, int, int], int] = {}
        # [(journal end when closed, {(scope, id, day): clicks})], oldest first; the last one is open.
        self.buckets: list[tuple[tuple[int, int] | None, dict[tuple[str, int, int], int]]] = [(None, {})]

    def add(self, scope: str, ref: int, day: int) -> None:
        super().add(scope, ref, day)
        counts = self.buckets[-1][1]
        key = (scope, ref, day)
        counts[key] = counts.get(key, 0) + 1

    def is_capped(self, scope: str, ref: int, daily_cap: int | None, total_cap: int | None, day: int) -> bool:
        if self.shared.is_alone:
            return True
        if super().is_capped(scope, ref, daily_cap, total_cap, day):
            return True
        if total_cap is not None and self.shared_totals.get((scope, ref), 0) >= total_cap:
            return True
        return daily_cap is not None and self.shared_days.get((scope, ref, day), 0) >= daily_cap

    def learn(self, scope: str, ref: int, day: int | None, count: int) -> None:
        """What Redis counts for a key (day None: the total)."""
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
