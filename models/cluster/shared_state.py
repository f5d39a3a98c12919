"""What the cluster's nodes share at click speed, in Redis: cap leases and the LP click's first-wins claim.

A click asks Redis nothing in the usual case (docs/SCALING.md, "Visitor affinity"): nginx sends one
visitor to one node, which answers debounce and uniqueness from what it saw itself (its journal and its
own visitor file, models/store/nodevisitors.py), and caps from the units its web worker leased in
advance (models/cluster/leases.py). What is left here:

1. cap leases  `cap:{scope}:{id}:{day}` and `cap:{scope}:{id}:total` count the units taken of a cap
               (spent by clicks or held in leases). A worker that holds no unit of a cap its route needs
               runs LEASE_SCRIPT once for all it lacks: refused if one is at its cap (the node routes
               again without it), seeded if one is missing (SET NX from the database and the node's
               unlanded clicks), else a block of each. A click spends one unit of each cap after its
               route is final; a click whose line cannot be written puts them back (`forget_last`).
               Redis away, a worker spends only the units it holds. A clean stop gives them back.
2. the LP click's first wins (models/clicks/tracker.py `lp_click`): `lp:{subid}` holds the answer of
               the click's first LP click (its offer and Location), claimed before its line is written; a
               node that finds it there answers the same and writes nothing. One script per LP click (not
               per click); the offer's caps are spent from the worker's leases once it is claimed. A
               node killed between the claim and its line leaves an answer no line backs, and the
               visitor's retry gets that offer with the LP click unrecorded (the rarer loss, against two
               offers for one click). A line that cannot be written (a full disk) gives the claim back
               and puts the units back (`release_lp`). It expires after LP_CLAIM_MS. A click sent to a
               lander also leaves its journal line at `lpclick:{subid}` (sent without waiting for the
               reply), so a node whose visitor's LP click comes in before the click's node landed it
               finds the click there (models/clicks/spool.py parks that LP line until its click lands).

Every key carries the prefix (LANNER_REDIS_PREFIX); the day cap counters expire three days after they
are seeded, the claims after LP_CLAIM_MS. When Redis cannot be reached or answers late
(LANNER_REDIS_TIMEOUT) the node goes on alone (`Alone`); Redis is asked again after RETRY_AFTER seconds,
and the degradation is logged once a minute. A worker that asks Redis nothing for its clicks still
notices it go away and come back: `check()`, paced by the tracker's refresh, pings it once a second.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as error:  # Only a process with LANNER_REDIS_URL set imports this module.
    raise ImportError(
        "LANNER_REDIS_URL needs redis-py, the `cluster` extra: .venv/bin/pip install -e '.[cluster]'"
    ) from error

from models.clicks.throttledlog import ThrottledLog
from models.cluster.leases import HOLDER_TTL_MS, MAX_BLOCK, CapLeases, LeaseKey

logger = logging.getLogger(__name__)

RETRY_AFTER = 1.0  # Seconds a node goes on alone after Redis failed, before the next click asks again.
CHECK_EVERY = 1.0  # Seconds between a worker's liveness pings of Redis (`check`).
DAY_KEY_MS = 3 * 86_400_000  # A day's cap counter outlives its day (any timezone) and a late seeder.
SEPARATOR = "\x1f"  # Between a stored decision's fields: never in a subid, an id or a URL.
LP_CLAIM_MS = 3_600_000  # How long the first LP click's answer is kept (its line lands within seconds).

# The LP click's first-wins claim. KEYS: lp:{subid}. ARGV: the claim (offer, Location), its PX.
# Returns {1, claim} (another LP click of the subid was first) or {0} (claimed).
LP_SCRIPT = """
local first = redis.call('GET', KEYS[1])
if first then return {1, first} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {0}
"""
# A lease of cap units (models/cluster/leases.py): the worker registers as a live holder, and if no
# counter is at its cap (2) or missing (3) each gets the same block: the rest of the tightest over twice
# the live holders, 1 to ARGV[4]. Never past a cap: a block is at most the rest of every counter.
# The epoch names this Redis's counters: a Redis that lost them gets a new one, and units leased from
# the old one are dropped by their holders and never given back to the new counters.
# KEYS: the holders (a sorted set by last lease), the epoch, then the counters.
# ARGV: holder, its unix ms, holder ttl ms, max block, a new epoch (set if none), number of counters,
#       then each counter's cap.
# Returns {2, counts} (one is at its cap), {3, counts} (one is missing: seed it; -1 for a missing one),
# {0, counts after, block, epoch}.
LEASE_SCRIPT = """
local now = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = ARGV[5]
  redis.call('SET', KEYS[2], epoch)
end
local n = tonumber(ARGV[6])
local counts = {}
local refused, missing = false, false
for i = 1, n do
  local count = redis.call('GET', KEYS[2 + i])
  if count then
    count = tonumber(count)
    if count >= tonumber(ARGV[6 + i]) then refused = true end
  else
    count = -1
    missing = true
  end
  counts[i] = count
end
if refused then return {2, counts} end
if missing then return {3, counts} end
local holders = redis.call('ZCARD', KEYS[1])
local block = tonumber(ARGV[4])
for i = 1, n do
  local rest = math.floor((tonumber(ARGV[6 + i]) - counts[i]) / (2 * holders))
  if rest < block then block = rest end
end
if block < 1 then block = 1 end
for i = 1, n do counts[i] = redis.call('INCRBY', KEYS[2 + i], block) end
return {0, counts, block, epoch}
"""
# Units go back to the counters of the epoch they were leased from only: KEYS[first] the epoch and
# ARGV[first] the holder's, then from first + 1 on the counters and each one's units. 1 if given back.
RETURN_TO_EPOCH = """
local function return_units(first)
  if redis.call('GET', KEYS[first]) ~= ARGV[first] then return 0 end
  for i = first + 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('DECRBY', KEYS[i], ARGV[i]) end
  end
  return 1
end
"""
# A clean stop gives its unspent units back and leaves the holders.
# KEYS: the holders, the epoch, then the counters. ARGV: holder, its epoch, then each counter's units.
GIVE_BACK = (
    RETURN_TO_EPOCH
    + """
redis.call('ZREM', KEYS[1], ARGV[1])
return return_units(2)
"""
)
# Units leased under a cap since changed go back.
# KEYS: the epoch, then the counters. ARGV: its epoch, then each counter's units.
RETURN_UNITS = RETURN_TO_EPOCH + "return return_units(1)\n"
# A claimed LP click whose line cannot be written: its claim is deleted (its units go back to the lease).
UNCLAIM = """
redis.call('DEL', KEYS[1])
"""


@dataclass(frozen=True, slots=True)
class Cap:
    """One counter a click of the route must pass: a stream's or offer's day (or total, day None)."""

    scope: str  # models.routing.caps.STREAM or OFFER
    ref: int
    day: int | None  # YYYYMMDD in the cap's timezone; None for the total cap.
    cap: int


@dataclass(frozen=True, slots=True)
class Refused:
    """A cap is reached: the counts of the route's caps as Redis has them."""

    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Alone:
    """Redis cannot answer now, and the route's caps (if any) are served from the worker's leases: the
    click goes on with this node's own debounce and uniqueness."""


@dataclass(frozen=True, slots=True)
class Claimed:
    """The LP click is the subid's first across the nodes, its offer's caps spent from the worker's
    leases: what Redis counts as taken where a lease was asked for (-1 where none was)."""

    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Counted:
    """The click's caps are spent from the worker's leases: what Redis counts as taken of them where a
    lease was asked for (-1 where the lease held a unit already)."""

    counts: tuple[int, ...]


class SharedState:
    """One per web worker: its Redis connection, its cap leases, and whether Redis answers."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "lanner:",
        timeout: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[dict], None] | None = None,
    ) -> None:
        """`on_change(status())` is called now, at each failure (the first, then each failed retry: at
        most once per RETRY_AFTER) and when Redis answers again: never on a click that goes as usual.
        The web worker publishes it for `lanner status` (workers/runtime/redisview.py)."""
        self.url, self.prefix, self.clock = url, prefix, clock
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )
        # PERF: a lander click's line goes straight down one connection of the client's pool, its reply
        # read before the next one's (`share_click_line`). Connected on first use.
        self.connection = self.client.connection_pool.make_connection()
        self.is_degraded = False  # Redis failed and has not answered since: the node is alone.
        self.degraded_since: float | None = None  # time.time() of the failure that began it.
        self.retry_at = 0.0
        self.last_error = ""
        self.alone_clicks = 0  # Clicks answered while Redis could not be reached, since it last could.
        self.last_outage: dict | None = None  # The last outage that ended: when, how long, its clicks.
        # The lease units the last click spent, until its line is written (`settle`, `forget_last`).
        self.counted_caps: list[LeaseKey] = []
        self.lp_claim: str | None = None  # The last LP click claimed...
        self.lp_spent: list[LeaseKey] = []  # ...and the lease units it spent.
        self._lp_script = self.client.register_script(LP_SCRIPT)  # Loaded on first use (EVALSHA after).
        self._lease_script = self.client.register_script(LEASE_SCRIPT)
        self._give_back_script = self.client.register_script(GIVE_BACK)
        self._return_units_script = self.client.register_script(RETURN_UNITS)
        self.leases = CapLeases()  # Cap units this worker reserved and has not spent (leases.py).
        self.holder = f"{os.getpid()}-{secrets.token_hex(6)}"  # This worker among the lease holders.
        self.epoch: bytes | None = None  # The epoch of the Redis counters its leases came from.
        self.unread = 0  # Replies of shared lander lines still on the connection, read before the next.
        self.next_check = 0.0  # When `check` pings Redis next (self.clock).
        self._log = ThrottledLog(logger, logging.WARNING, interval=60.0, clock=clock)
        self.on_change = on_change
        self._changed()

    def close(self) -> None:
        """A clean stop: unspent lease units go back to the counters (`give_back`)."""
        self.give_back()
        self._disconnect()
        self.client.close()

    def give_back(self) -> None:
        """Give every unspent lease unit back to Redis and leave the holders (a worker stopping). Units
        of an epoch Redis no longer has are dropped; if Redis cannot be reached they are lost: the cap
        stops short by them, never over."""
        held = self.leases.drain()
        if self.epoch is None:
            return  # Never leased: not a holder.
        keys = [self._holders_key, self._epoch_key, *(self._lease_key(key) for key in held)]
        try:
            self._give_back_script(keys=keys, args=[self.holder, self.epoch, *held.values()])
        except redis.RedisError as error:
            logger.warning(
                "cannot give %d cap units back to Redis (%s): those caps stop short by them",
                sum(held.values()),
                error,
            )

    @property
    def should_ask(self) -> bool:
        """False while a failure is recent: the click goes on alone without waiting for a timeout."""
        return not self.is_degraded or self.clock() >= self.retry_at

    @property
    def is_alone(self) -> bool:
        """Redis failed and is not to be asked yet: the node decides alone (caps: what its leases hold)."""
        return self.is_degraded and self.clock() < self.retry_at

    def count(
        self, caps: Sequence[Cap], seed: Callable[[Cap], int] | None, now_ms: int
    ) -> Counted | Refused | Alone | None:
        """Spend a unit of each of the click's caps from the worker's leases, asking Redis for a lease
        only for the caps it holds none of (`seed(cap)`: the count a missing counter starts from):
        Counted, Refused (a cap is full across the nodes: route again), Alone (Redis cannot answer now,
        the leases hold the caps, or there is none), None (Redis cannot answer and the leases do not
        hold them: the click must go elsewhere)."""
        self.counted_caps = []
        if self.is_degraded and self.should_ask:
            self.check()  # Past the backoff: does Redis answer again? (A ping, once a RETRY_AFTER.)
        if self.is_degraded and not self.should_ask:
            self.alone_clicks += 1
            return self._alone(caps)
        lease_keys = _lease_keys(caps)
        if self.leases.covers(lease_keys):  # The usual click: nothing to ask.
            if self.is_degraded:
                self.alone_clicks += 1
                return self._alone(caps)
            self.counted_caps = self.leases.spend(lease_keys)
            return Counted((-1,) * len(caps))
        try:
            counts = self._lease(caps, seed, now_ms)
        except redis.RedisError as error:
            if not isinstance(error, redis.ResponseError):  # A reply may still be on its way: start over.
                self._disconnect()
            self._fail(error)
            self.alone_clicks += 1
            return self._alone(caps)
        if self.is_degraded:
            self._recover()
        if isinstance(counts, Refused):
            return counts
        self.counted_caps = self.leases.spend(lease_keys)
        return Counted(counts)

    def check(self) -> None:
        """At most once a CHECK_EVERY (the tracker's refresh calls it): ping Redis, so a worker whose clicks
        ask it nothing still sees it go away (and come back) for `/healthz` and `lanner status`."""
        now = self.clock()
        if now < self.next_check or (self.is_degraded and now < self.retry_at):
            return
        self.next_check = now + CHECK_EVERY
        try:
            self.client.ping()
        except redis.RedisError as error:
            self._fail(error)
            return
        if self.is_degraded:
            self._recover()

    def _lease(
        self, caps: Sequence[Cap], seed: Callable[[Cap], int] | None, now_ms: int
    ) -> tuple[int, ...] | Refused:
        """Lease units of the caps this worker holds none of, in one script: Refused (one is at its cap,
        Redis's counts of the caps asked, -1 for the others) or what Redis counts as taken after the
        lease (-1 for the caps the leases held a unit of already). A Redis of a new epoch (it lost its
        counters) voids every unit held, and the lease is asked again for all of the caps."""
        counts = [-1] * len(caps)
        lease_keys = _lease_keys(caps)
        stale = self.leases.superseded(lease_keys)
        if stale and self.epoch is not None:  # Leased under a cap changed since: given back first.
            keys = [self._epoch_key, *(self._lease_key(key) for key in stale)]
            self._return_units_script(keys=keys, args=[self.epoch, *stale.values()])
        for _ in range(2):
            lacking = self.leases.lacking(lease_keys)
            if not lacking:
                return tuple(counts)
            asked = [caps[i] for i in lacking]
            keys = [self._holders_key, self._epoch_key, *(self._cap_key(cap) for cap in asked)]
            args: list[str | int] = [self.holder, now_ms, HOLDER_TTL_MS, MAX_BLOCK, secrets.token_hex(8)]
            args.append(len(asked))
            args += [cap.cap for cap in asked]
            answer = self._seeded(partial(self._lease_script, keys=keys, args=args), asked, seed)
            for i, count in zip(lacking, answer[1], strict=True):
                counts[i] = count
            if answer[0] == 2:
                return Refused(tuple(counts))
            block, epoch = answer[2], answer[3]
            if self.epoch is not None and epoch != self.epoch and self.leases.held:
                # Leased from counters Redis lost: their units are in no counter now. The units just
                # granted were counted in the new ones: only they are kept, the rest asked again.
                self.leases.drain()
                self.epoch = epoch
                for i in lacking:
                    self.leases.grant(lease_keys[i], block)
                continue
            self.epoch = epoch
            for i in lacking:
                self.leases.grant(lease_keys[i], block)
            return tuple(counts)
        raise redis.RedisError("the cap counters' epoch changed twice during one lease")

    def _alone(self, caps: Sequence[Cap]) -> Alone | None:
        """Redis cannot answer now: Alone if the leases hold a unit of each cap (one of each spent),
        None if not (the click must go elsewhere: a capped stream or offer gets none meanwhile)."""
        lease_keys = _lease_keys(caps)
        if not self.leases.covers(lease_keys):
            return None
        self.counted_caps = self.leases.spend(lease_keys)
        return Alone()

    def settle(self) -> None:
        """The last click's line is in the journal: the units it spent are spent for good."""
        self.counted_caps = []

    def forget_last(self) -> None:
        """The last click counted got no line after all (its spool cannot be written): the lease units it
        spent are put back, for the next click (a full disk's refused clicks would else use up every cap
        of the cluster)."""
        spent, self.counted_caps = self.counted_caps, []
        self.leases.put_back(spent)

    def claim_lp(
        self,
        subid: str,
        offer_id: int | None,
        location: str,
        caps: Sequence[Cap] = (),
        seed: Callable[[Cap], int] | None = None,
    ) -> Claimed | Refused | Alone | tuple[int | None, str] | None:
        """Make this the first LP click of `subid` across the nodes and count its offer's `caps`, in one
        step (see the module docstring): Claimed (write its line), Refused (a cap is full: nothing
        claimed, choose again), (offer_id, location) of the first when another node's was (nothing
        counted), Alone when Redis cannot answer now and the leases cover the caps (the node decides
        alone, as a click does), None when they do not."""
        self.lp_claim = None
        self.lp_spent = []
        if not self.should_ask:
            self.alone_clicks += 1
            return self._alone_lp(caps)
        claim = f"{self.prefix}lp:{subid}"
        value = f"{'' if offer_id is None else offer_id}{SEPARATOR}{location}"
        try:
            counts = self._lease(caps, seed, int(time.time() * 1000))
            if isinstance(counts, Refused):
                if self.is_degraded:
                    self._recover()
                return counts
            answer = self._lp_script(keys=[claim], args=[value, LP_CLAIM_MS])  # Its caps: the leases'.
        except redis.RedisError as error:
            self._fail(error)
            self.alone_clicks += 1
            return self._alone_lp(caps)
        if self.is_degraded:
            self._recover()
        if answer[0] == 1:
            offer, _, location = answer[1].decode("utf-8", "replace").partition(SEPARATOR)
            return (int(offer) if offer.isdigit() else None), location
        self.lp_claim = claim
        self.lp_spent = self.leases.spend(_lease_keys(caps))
        return Claimed(counts)

    def spend_leased(self, caps: Sequence[Cap], *, is_lp: bool = False) -> bool:
        """Redis is away and the click was routed again: spend a unit of each of the new route's caps
        from the leases (True), or False if they do not hold them all."""
        answer = self._alone_lp(caps) if is_lp else self._alone(caps)
        return answer is not None

    def _alone_lp(self, caps: Sequence[Cap]) -> Alone | None:
        answer = self._alone(caps)
        self.lp_spent, self.counted_caps = self.counted_caps, []
        return answer

    def share_click_line(self, subid: str, line: bytes) -> None:
        """A click sent to a lander has its line in the journal: leave it for the other nodes' LP clicks
        (sent without waiting for the reply, which is read before the next one is sent)."""
        if self.is_degraded:
            return
        try:
            self._read_published()  # The last one's reply, long arrived: one reply at most waits.
            self.connection.send_command("SET", f"{self.prefix}lpclick:{subid}", line, "PX", LP_CLAIM_MS)
            self.unread += 1
        except redis.RedisError:
            self._disconnect()

    def shared_click_line(self, subid: str) -> bytes | None:
        """The journal line of a click another node sent to a lander, until it expires; None if none
        (or Redis cannot answer now)."""
        if not self.should_ask:
            return None
        try:
            return self.client.get(f"{self.prefix}lpclick:{subid}")  # type: ignore[return-value]  # Not decoded.
        except redis.RedisError as error:
            self._fail(error)
            return None

    def release_lp(self) -> None:
        """The LP click last claimed (or decided alone) got no line after all (a full disk): the next
        one may be the first, and its lease units are put back (as `forget_last` puts a click's)."""
        claim, self.lp_claim = self.lp_claim, None
        spent, self.lp_spent = self.lp_spent, []
        self.leases.put_back(spent)
        if claim is None:
            return
        try:
            self.client.eval(UNCLAIM, 1, claim)
        except redis.RedisError:
            pass  # Its answer stays until it expires: a retry gets that offer, unrecorded.

    def _seeded(
        self, run: Callable[[], list], caps: Sequence[Cap], seed: Callable[[Cap], int] | None
    ) -> list:
        """A script's answer once its missing cap counters are seeded (`seed(cap)`: where one starts)."""
        for _ in range(3):  # Seeding, then the click; a third look only if a counter expired meanwhile.
            answer = run()
            if answer[0] != 3:
                return answer
            self._seed([cap for cap, count in zip(caps, answer[1], strict=True) if count < 0], seed)
        raise redis.RedisError("a cap counter went missing again after it was seeded")

    def _cap_key(self, cap: Cap) -> str:
        return self._lease_key((cap.scope, cap.ref, cap.day, cap.cap))

    def _lease_key(self, key: LeaseKey) -> str:
        """The Redis counter a lease's units are of (the cap they were leased under is not part of it)."""
        scope, ref, day, _ = key
        return f"{self.prefix}cap:{scope}:{ref}:{'total' if day is None else day}"

    @property
    def _holders_key(self) -> str:
        return f"{self.prefix}cap-holders"

    @property
    def _epoch_key(self) -> str:
        return f"{self.prefix}cap-epoch"

    def _read_published(self) -> None:
        """Read the replies of the lander lines shared since the last one."""
        while self.unread:
            self.unread -= 1
            try:
                self.connection.read_response()
            except redis.ResponseError:  # That line was refused (OOM): its LP click waits for it to land.
                pass

    def _disconnect(self) -> None:
        self.connection.disconnect()
        self.unread = 0

    def _seed(self, caps: list[Cap], seed: Callable[[Cap], int] | None) -> None:
        """Start missing counters from the database and this node's unlanded clicks; SET NX: the first
        seeder wins and every node counts on from the same number."""
        pipe = self.client.pipeline(transaction=False)
        for cap in caps:
            if seed is None:  # Nothing to start it from: this click goes on alone.
                raise redis.RedisError(f"the {cap.scope} {cap.ref} cap counter is missing and has no seed")
            try:
                count = seed(cap)
            except Exception as error:  # The database is busy or away: this click goes on alone.
                raise redis.RedisError(
                    f"the {cap.scope} {cap.ref} cap counter cannot be seeded: {error}"
                ) from error
            pipe.set(self._cap_key(cap), count, nx=True, px=None if cap.day is None else DAY_KEY_MS)
        pipe.execute()

    def _fail(self, error: Exception) -> None:
        self.retry_at = self.clock() + RETRY_AFTER
        self.last_error = str(error) or type(error).__name__
        if not self.is_degraded:
            self.is_degraded = True
            self.degraded_since = time.time()
        self._log(
            "Redis (%s) cannot be reached (%s): clicks go on, and capped streams and offers get only the "
            "units this worker holds until it answers (%d clicks so far)",
            self.shown_url,
            self.last_error,
            self.alone_clicks,
        )
        self._changed()

    def _recover(self) -> None:
        logger.warning(
            "Redis (%s) answers again after %.0f s: %d clicks were answered by this node alone",
            self.shown_url,
            time.time() - (self.degraded_since or time.time()),
            self.alone_clicks,
        )
        now = time.time()
        self.last_outage = {
            "ended_at": now,
            "seconds": round(now - (self.degraded_since or now), 1),
            "alone_clicks": self.alone_clicks,
        }
        self.is_degraded = False
        self.degraded_since = None
        self.alone_clicks = 0
        self._log.next_at = float("-inf")  # The next outage is logged at once.
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change(self.status())
            except Exception:  # Only `lanner status` misses it: never the click.
                logger.warning("cannot publish this worker's Redis state", exc_info=True)

    @property
    def shown_url(self) -> str:
        """The URL without its password."""
        return shown_url(self.url)

    def status(self) -> dict:
        """For `lanner status`: whether this worker's Redis answers, since when not, and why."""
        return {
            "url": self.shown_url,
            "state": "degraded" if self.is_degraded else "ok",
            "degraded_since": self.degraded_since,
            "last_error": self.last_error if self.is_degraded else "",
            "alone_clicks": self.alone_clicks,
            "last_outage": self.last_outage,
        }

    def ping(self) -> bool:
        """One PING, for status pages; does not change the click path's state."""
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False


def _lease_keys(caps: Sequence[Cap]) -> list[LeaseKey]:
    return [(cap.scope, cap.ref, cap.day, cap.cap) for cap in caps]


def shown_url(url: str) -> str:
    """A Redis URL without its password: in the userinfo (`redis://user:PASSWORD@…`) or in the query
    (`unix:///run/redis.sock?password=PASSWORD`, which redis-py also reads)."""
    import re

    url = re.sub(r"(://[^/@:\s]*:)[^/@\s]+@", r"\1***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)


def redis_health(url: str, *, timeout: float = 0.5) -> dict:
    """For `lanner status` from any process: whether the Redis at `url` answers, how fast, its memory."""
    shown = SharedState(url, timeout=timeout)
    try:
        started = time.perf_counter()
        shown.client.ping()
        round_trip_ms = (time.perf_counter() - started) * 1000
        memory = shown.client.info("memory")
        return {
            "url": shown.shown_url,
            "state": "ok",
            "round_trip_ms": round(round_trip_ms, 2),
            "used_memory": memory.get("used_memory"),
            "maxmemory": memory.get("maxmemory"),
        }
    except redis.RedisError as error:
        return {"url": shown.shown_url, "state": "unreachable", "error": str(error) or type(error).__name__}
    finally:
        shown.close()
