"""What every click node must share at click speed, in Redis: debounce, cap counters, uniqueness.

One Lua script, loaded once (SCRIPT LOAD; EVALSHA after, loaded again on NOSCRIPT), answers one click
atomically in one round trip (docs/SCALING.md, "One Redis round trip per click"):

1. debounce   `debounce:{campaign}:{visitor}:{ua_hash}` holds the decision of the visitor's last click in
              the campaign and its time: if that is within debounce of this click (by the nodes' clocks,
              as on one box), the script returns it (the same subid: one click, no line) and changes
              nothing else;
2. caps       for each cap of the route's stream and offer, `cap:{scope}:{id}:{day}` and
              `cap:{scope}:{id}:total`: if any is at its cap the click is refused (nothing is written;
              the node routes again without it); if any is missing (first use, Redis restarted) the
              node seeds it (SET NX, so concurrent seeders agree) and asks again; else every one is
              incremented: all or nothing;
3. uniqueness `unique:g:{visitor}`, `unique:campaign:{id}:{visitor}`, `unique:stream:{id}:{visitor}`:
              `SET … PX window GET`, so each holds the visitor's latest click for its window; the flag is
              whether there was none.

Every key carries the prefix (LANNER_REDIS_PREFIX) and all but the total cap counters expire (debounce
after debounce, uniqueness after its window, a day's counter two days after it), so memory is bounded by
the visitors of a window. When Redis cannot be reached or answers late (LANNER_REDIS_TIMEOUT), `click`
returns None and the node goes on alone (models/clicks/tracker.py); Redis is asked again after
RETRY_AFTER seconds, and the degradation is logged once a minute.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Sequence

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as error:  # Only a process with LANNER_REDIS_URL set imports this module.
    raise ImportError(
        "LANNER_REDIS_URL needs redis-py, the `cluster` extra: .venv/bin/pip install -e '.[cluster]'"
    ) from error

from models.clicks.throttledlog import ThrottledLog

logger = logging.getLogger(__name__)

RETRY_AFTER = 1.0  # Seconds a node goes on alone after Redis failed, before the next click asks again.
# The nodes' clocks say when a click is a repeat (its time is in the stored decision); Redis's own expiry
# only frees the key, this much later, so a clock a little ahead of Redis's still finds it.
DEBOUNCE_MARGIN_MS = 1000
DAY_KEY_MS = 3 * 86_400_000  # A day's cap counter outlives its day (any timezone) and a late seeder.
SEPARATOR = "\x1f"  # Between a stored decision's fields: never in a subid, an id or a URL.

# KEYS: debounce, unique global, unique campaign, unique stream, then the cap counters.
# ARGV: decision (its unix ms first), debounce ms, global window ms, campaign window ms, has stream (0/1),
#       the click's unix ms, number of caps, then each cap counter's cap.
# Returns {1, decision} (a repeat), {2, counts} (refused: a count per cap, -1 for a missing counter),
#         {3, counts} (a counter is missing: seed it), {0, global, campaign, stream, counts...}.
SCRIPT = """
local debounce_ms = tonumber(ARGV[2])
if debounce_ms > 0 then
  local earlier = redis.call('GET', KEYS[1])
  local at = earlier and tonumber(string.match(earlier, '^%d+'))
  if at and at >= tonumber(ARGV[6]) - debounce_ms then return {1, earlier} end
end
local caps = tonumber(ARGV[7])
local counts = {}
local refused, missing = false, false
for i = 1, caps do
  local count = redis.call('GET', KEYS[4 + i])
  if count then
    count = tonumber(count)
    if count >= tonumber(ARGV[7 + i]) then refused = true end
  else
    count = -1
    missing = true
  end
  counts[i] = count
end
if refused then return {2, counts} end
if missing then return {3, counts} end
if debounce_ms > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', debounce_ms + DEBOUNCE_MARGIN_MS) end
for i = 1, caps do counts[i] = redis.call('INCR', KEYS[4 + i]) end
local g = redis.call('SET', KEYS[2], 1, 'PX', ARGV[3], 'GET') and 0 or 1
local c = redis.call('SET', KEYS[3], 1, 'PX', ARGV[4], 'GET') and 0 or 1
local s = 0
if ARGV[5] == '1' then s = redis.call('SET', KEYS[4], 1, 'PX', ARGV[4], 'GET') and 0 or 1 end
return {0, g, c, s, counts}
""".replace("DEBOUNCE_MARGIN_MS", str(DEBOUNCE_MARGIN_MS))


@dataclass(frozen=True, slots=True)
class Cap:
    """One counter a click of the route must pass: a stream's or offer's day (or total, day None)."""

    scope: str  # models.routing.caps.STREAM or OFFER
    ref: int
    day: int | None  # YYYYMMDD in the cap's timezone; None for the total cap.
    cap: int


@dataclass(frozen=True, slots=True)
class Repeat:
    """Another node's click of the visitor in the campaign within debounce: its decision."""

    subid: str
    stream_id: int | None
    offer_id: int | None
    location: str | None


@dataclass(frozen=True, slots=True)
class Refused:
    """A cap is reached: the counts of the route's caps as Redis has them."""

    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Counted:
    """The click is counted: its uniqueness flags (1 = unique across nodes) and the caps' new counts."""

    flags: tuple[int, int, int]
    counts: tuple[int, ...]


class SharedState:
    """One per web worker: its Redis connection, the script's digest, and whether Redis answers."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "lanner:",
        timeout: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url, self.prefix, self.clock = url, prefix, clock
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        )
        # PERF: the click's script goes straight down one connection of the client's pool: redis-py's
        # command machinery (pool, retries) around it cost ~10 µs a click. Connected on first use.
        self.connection = self.client.connection_pool.make_connection()
        self.digest: str | None = None
        self.is_degraded = False  # Redis failed and has not answered since: the node is alone.
        self.degraded_since: float | None = None  # time.time() of the failure that began it.
        self.retry_at = 0.0
        self.last_error = ""
        self.alone_clicks = 0  # Clicks answered without Redis since it was last reachable.
        self.last_debounce_key: str | None = None  # Of the last click counted: see `forget_last`.
        self._log = ThrottledLog(logger, logging.WARNING, interval=60.0, clock=clock)

    def close(self) -> None:
        self.connection.disconnect()
        self.client.close()

    @property
    def should_ask(self) -> bool:
        """False while a failure is recent: the click goes on alone without waiting for a timeout."""
        return not self.is_degraded or self.clock() >= self.retry_at

    @property
    def is_alone(self) -> bool:
        """Redis failed and is not to be asked yet: the node decides alone (caps: all full)."""
        return self.is_degraded and self.clock() < self.retry_at

    def click(
        self,
        campaign_id: int,
        visitor: int,
        ua_hash: int,
        stored: Repeat,
        debounce_ms: int,
        global_ms: int,
        route_campaign_id: int,
        campaign_ms: int,
        stream_id: int | None,
        caps: Sequence[Cap],
        seed: Callable[[Cap], int],
        now_ms: int,
    ) -> Repeat | Refused | Counted | None:
        """Ask Redis for one click (see the module docstring); None when Redis cannot answer now.

        `campaign_id`: the campaign clicked (debounce); `route_campaign_id`: the one routed to (another
        campaign's stream may send the click on), whose window `campaign_ms` is for campaign and stream
        uniqueness; `stored`: what a repeat of this click within debounce is answered; `seed(cap)`: the
        count a missing counter starts from.
        """
        self.last_debounce_key = None
        if not self.should_ask:
            self.alone_clicks += 1
            return None
        p = self.prefix
        keys = [
            f"{p}debounce:{campaign_id}:{visitor}:{ua_hash}",
            f"{p}unique:g:{visitor}",
            f"{p}unique:campaign:{route_campaign_id}:{visitor}",
            f"{p}unique:stream:{stream_id}:{visitor}",
            *(self._cap_key(cap) for cap in caps),
        ]
        value = SEPARATOR.join(
            ("" if v is None else str(v))
            for v in (now_ms, stored.subid, stored.stream_id, stored.offer_id, stored.location)
        )
        args = [
            value, debounce_ms, max(global_ms, 1), max(campaign_ms, 1), 0 if stream_id is None else 1, now_ms,
            len(caps), *(cap.cap for cap in caps),
        ]  # fmt: skip
        try:
            for _ in range(3):  # Seeding, then the click; a third look only if a counter expired meanwhile.
                answer = self._run(keys, args)
                kind = answer[0]
                if kind == 3:
                    self._seed([cap for cap, count in zip(caps, answer[1]) if count < 0], seed)
                    continue
                break
            else:
                raise redis.RedisError("a cap counter went missing again after it was seeded")
        except redis.RedisError as error:
            if not isinstance(error, redis.ResponseError):  # A reply may still be on its way: start over.
                self.connection.disconnect()
            self._fail(error)
            return None
        if self.is_degraded:
            self._recover()
        if kind == 1:
            return _repeat(answer[1])
        if kind == 2:
            return Refused(tuple(answer[1]))
        self.last_debounce_key = keys[0] if debounce_ms > 0 else None
        return Counted((answer[1], answer[2], answer[3]), tuple(answer[4]))

    def forget_last(self) -> None:
        """The last click counted got no line after all (its spool cannot be written): take its decision
        back, so no node answers a repeat with a subid that will never land. Its cap counts and
        uniqueness keys stay (a cap one high errs on the safe side)."""
        key, self.last_debounce_key = self.last_debounce_key, None
        if key is not None and not self.is_degraded:
            try:
                self.client.delete(key)
            except redis.RedisError:
                pass  # Redis left meanwhile: the key expires within seconds anyway.

    def _cap_key(self, cap: Cap) -> str:
        return f"{self.prefix}cap:{cap.scope}:{cap.ref}:{'total' if cap.day is None else cap.day}"

    def _run(self, keys: list[str], args: list) -> list:
        connection = self.connection
        if self.digest is None:
            self.digest = self._load(connection)
        try:
            connection.send_command("EVALSHA", self.digest, len(keys), *keys, *args)
            return connection.read_response()
        except redis.exceptions.NoScriptError:  # Redis restarted (or SCRIPT FLUSH): load it again.
            self.digest = self._load(connection)
            connection.send_command("EVALSHA", self.digest, len(keys), *keys, *args)
            return connection.read_response()

    @staticmethod
    def _load(connection) -> bytes:
        connection.send_command("SCRIPT", "LOAD", SCRIPT)
        return connection.read_response()

    def _seed(self, caps: list[Cap], seed: Callable[[Cap], int]) -> None:
        """Start missing counters from the database and this node's unlanded clicks; SET NX: the first
        seeder wins and every node counts on from the same number."""
        pipe = self.client.pipeline(transaction=False)
        for cap in caps:
            try:
                count = seed(cap)
            except Exception as error:  # The database is busy or away: this click goes on alone.
                raise redis.RedisError(
                    f"the {cap.scope} {cap.ref} cap counter cannot be seeded: {error}"
                ) from error
            pipe.set(self._cap_key(cap), count, nx=True, px=None if cap.day is None else DAY_KEY_MS)
        pipe.execute()

    def _fail(self, error: Exception) -> None:
        self.alone_clicks += 1
        self.retry_at = self.clock() + RETRY_AFTER
        self.last_error = str(error) or type(error).__name__
        if not self.is_degraded:
            self.is_degraded = True
            self.degraded_since = time.time()
            self.digest = None  # A Redis that comes back may be a fresh one.
        self._log(
            "Redis (%s) cannot be reached (%s): clicks go on with this node's own debounce and uniqueness, "
            "and capped streams and offers get no clicks until it answers (%d clicks so far)",
            self.shown_url,
            self.last_error,
            self.alone_clicks,
        )

    def _recover(self) -> None:
        logger.warning(
            "Redis (%s) answers again after %.0f s: %d clicks were answered by this node alone",
            self.shown_url,
            time.time() - (self.degraded_since or time.time()),
            self.alone_clicks,
        )
        self.is_degraded = False
        self.degraded_since = None
        self.alone_clicks = 0
        self._log.next_at = float("-inf")  # The next outage is logged at once.

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
        }

    def ping(self) -> bool:
        """One PING, for status pages; does not change the click path's state."""
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False


def _repeat(value: bytes) -> Repeat:
    # At most 4 splits: a Location may carry anything a macro put in it.
    _, subid, stream_id, offer_id, location = value.decode("utf-8", "surrogateescape").split(SEPARATOR, 4)
    return Repeat(
        subid, int(stream_id) if stream_id else None, int(offer_id) if offer_id else None, location or None
    )


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
