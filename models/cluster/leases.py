"""A web worker's cap leases: units of cap counters Redis handed it in advance, spent click by click.

Asking Redis for every capped click made Redis the one thing every click of every node waited on
(docs/SCALING.md, "Caps reserved in blocks"). Instead a worker reserves a block of units of a cap
counter in one atomic step (models/cluster/shared_state.py `LEASE_SCRIPT`: never past the cap) and
answers the next clicks from it without a round trip. A unit is a click's permission: spent when the
click is counted, put back here (not in Redis) when its line cannot be written after all.

The block shrinks as the cap nears (`block_size`): half of what is left shared among the live holders,
down to 1, so near the cap every click asks and the last units go to whoever clicks, one at a time.
What a holder keeps is counted as taken in Redis: a worker killed with units left leaves the cap short
by those (at most its last block), never over. A clean stop gives them back (`SharedState.give_back`).

A day counter's units die with its day: a lease of a new day drops the old day's of the same key.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_BLOCK = 100  # Units a lease holds at most: what a killed worker can leave unused.
HOLDER_TTL_MS = 60_000  # A holder that asked for no lease this long no longer shares the cap's rest.

LeaseKey = tuple[str, int, int | None]  # (scope, id, day YYYYMMDD or None for the total cap).


def block_size(cap: int, taken: int, holders: int, max_block: int = MAX_BLOCK) -> int:
    """Units one lease takes of a counter at `taken` of `cap`: the rest over twice the live holders,
    at least 1 and at most `max_block` (the Lua script computes the same: kept here for the docs'
    reasoning and its test)."""
    return max(1, min(max_block, (cap - taken) // (2 * max(holders, 1))))


class CapLeases:
    """Units held per cap counter, by (scope, id, day)."""

    def __init__(self) -> None:
        self.held: dict[LeaseKey, int] = {}

    def units(self, key: LeaseKey) -> int:
        return self.held.get(key, 0)

    def covers(self, keys: Iterable[LeaseKey]) -> bool:
        """True if a click needing one unit of each key can be served from what is held."""
        held = self.held
        return all(held.get(key, 0) > 0 for key in keys)

    def lacking(self, keys: Iterable[LeaseKey]) -> list[int]:
        """The positions of the keys with no unit left."""
        held = self.held
        return [i for i, key in enumerate(keys) if held.get(key, 0) <= 0]

    def grant(self, key: LeaseKey, units: int) -> None:
        scope, ref, day = key
        if day is not None:  # Yesterday's units of the same counter are worth nothing now.
            old = [k for k in self.held if k[:2] == (scope, ref) and k[2] is not None and k[2] < day]
            for stale in old:
                del self.held[stale]
        self.held[key] = self.held.get(key, 0) + units

    def spend(self, keys: Iterable[LeaseKey]) -> list[LeaseKey]:
        """One unit of each key (the caller checked `covers`): the keys spent, for `put_back`."""
        spent = list(keys)
        for key in spent:
            self.held[key] -= 1
        return spent

    def put_back(self, keys: Iterable[LeaseKey]) -> None:
        """The click they were spent on got no line: its units serve the next click."""
        for key in keys:
            self.held[key] = self.held.get(key, 0) + 1

    def drain(self) -> dict[LeaseKey, int]:
        """Every unit held, forgotten here (to be given back to Redis)."""
        held = {key: units for key, units in self.held.items() if units > 0}
        self.held = {}
        return held
