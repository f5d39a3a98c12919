"""Cluster-wide periodic sweeps: each tick runs on one node, however many nodes' schedulers queued it.

With Huey on Redis every node's consumer queues every periodic task at its tick, and any consumer may
run any copy. A sweep of the shared database (due postbacks, deferred migration steps, the postback log,
exchange rates) must not run N times on N nodes, nor twice at once. Two keys per sweep decide it:

- `sweep:{name}:lock` is held while the sweep runs: `SET NX PX` with a token of its holder, renewed every
  third of its TTL by a thread while the sweep runs, released only by its holder (compare and delete in
  one script). A holder killed mid-sweep stops renewing: the lock expires within LOCK_TTL_MS, so a dead
  node cannot stop a sweep for good. Huey's own lock_task is no use here: on RedisStorage it is a field
  of a hash, with no expiry before Redis 7.4, and its release deletes the lock whoever holds it.
- `sweep:{name}:claim`, set NX for `window` seconds (half the time between ticks), says this tick has
  been run: the other nodes' copies of the same tick, which arrive within seconds of each other whatever
  the nodes' clocks say, find it and skip. No clock is compared, so clock skew between nodes is harmless
  while it is under the window. A sweep that raises gives its claim back, so another copy may try.

`sweep:{name}` (a hash: node, at, runs, skipped) records the last run for `lanner status`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

import redis

logger = logging.getLogger(__name__)

LOCK_TTL_MS = 60_000  # A killed holder blocks the sweep at most this long.

# KEYS[1]: the key; ARGV[1]: the holder's token; ARGV[2]: the TTL in ms (renew only).
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
RENEW = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end "
    "return 0"
)


class SweepLock:
    """A Redis lock with an expiry, held by one token: `acquire`, `renew` while working, `release`."""

    def __init__(self, client: redis.Redis, key: str, ttl_ms: int = LOCK_TTL_MS) -> None:
        self.client, self.key, self.ttl_ms = client, key, ttl_ms
        self.token = uuid.uuid4().hex
        self._release = client.register_script(RELEASE)
        self._renew = client.register_script(RENEW)

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Push the expiry back a full TTL; False if the lock is no longer this holder's."""
        return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))

    def release(self) -> bool:
        """Drop the lock if this holder still has it (never another holder's)."""
        return bool(self._release(keys=[self.key], args=[self.token]))

    def kept(self) -> Renewal:
        """A context in which a thread renews the lock every third of its TTL."""
        return Renewal(self)


class Renewal:
    def __init__(self, lock: SweepLock) -> None:
        self.lock = lock
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"renew {lock.key}", daemon=True)

    def __enter__(self) -> Renewal:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stopping.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.stopping.wait(self.lock.ttl_ms / 3000):
            try:
                if not self.lock.renew():
                    logger.warning(
                        "lost %s while the sweep ran (this node stalled past its TTL)", self.lock.key
                    )
                    return
            except redis.RedisError as error:  # Tried again at the next third; the TTL covers two misses.
                logger.warning("could not renew %s: %s", self.lock.key, error)


class ClusterSweeps:
    """Runs each cluster-wide sweep's tick once over all nodes (see the module docstring)."""

    def __init__(
        self, client: redis.Redis, prefix: str, node: str, *, lock_ttl_ms: int = LOCK_TTL_MS
    ) -> None:
        self.client, self.prefix, self.node, self.lock_ttl_ms = client, prefix, node, lock_ttl_ms

    def run(self, name: str, window_seconds: float, sweep: Callable[[], object]) -> bool:
        """Run `sweep` unless another node runs it now or ran this tick; True if it ran here."""
        base = f"{self.prefix}sweep:{name}"
        lock = SweepLock(self.client, f"{base}:lock", self.lock_ttl_ms)
        if not lock.acquire():
            self._record(base, ran=False)
            return False
        try:
            claim = SweepLock(self.client, f"{base}:claim", int(window_seconds * 1000))
            if not claim.acquire():
                self._record(base, ran=False)
                return False
            try:
                with lock.kept():
                    sweep()
            except BaseException:
                claim.release()  # This tick is not done: another node's copy may run it.
                raise
            self._record(base, ran=True)
            return True
        finally:
            lock.release()

    def _record(self, base: str, *, ran: bool) -> None:
        pipe = self.client.pipeline(transaction=False)
        if ran:
            pipe.hset(base, mapping={"node": self.node, "at": int(time.time() * 1000)})
        pipe.hincrby(base, "runs" if ran else "skipped", 1)
        pipe.execute()

    def last_runs(self, names: list[str]) -> dict[str, dict]:
        """For `lanner status`: each sweep's last run (node, seconds ago) and its counts."""
        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(f"{self.prefix}sweep:{name}")
        now_ms = time.time() * 1000
        shown = {}
        for name, fields in zip(names, pipe.execute(), strict=True):
            fields = {k.decode(): v.decode() for k, v in fields.items()}
            at = fields.get("at")
            shown[name] = {
                "last_node": fields.get("node"),
                "last_run_s_ago": round((now_ms - int(at)) / 1000, 1) if at else None,
                "runs": int(fields.get("runs", 0)),
                "skipped": int(fields.get("skipped", 0)),
            }
        return shown
