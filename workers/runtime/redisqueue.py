"""Huey on Redis (LANNER_REDIS_URL set): one queue for every node, so any node's consumer sends any
node's outbound postbacks; imported only in cluster mode.

Huey's own key names ("huey.redis.NAME", ...) are replaced by keys under LANNER_REDIS_PREFIX
(`lanner:huey:queue`, `…:schedule`, `…:results`, `…:counters`), like every other key Lanner writes, so
installs sharing one Redis stay apart and an ACL can limit Lanner's user to `~lanner:*`.

Timeouts: a web worker queues a delivery inside a postback's request, so a Redis that does not answer
costs it CONNECT_TIMEOUT (the delivery row is stored; the minute's sweep sends it), never the OS's
minutes-long TCP connect. The consumer's BRPOP waits READ_TIMEOUT (a task pushed meanwhile returns it
at once), and its connections' SOCKET_TIMEOUT counts from the end of that wait.

Scheduled tasks (a delivery's retry) are a sorted set scored by the due time as a Unix time, read by
every node: the score is taken as UTC, whatever each node's timezone (see convert_ts).
"""

from __future__ import annotations

import calendar

import redis
from huey import RedisHuey
from huey.storage import RedisStorage
from redis.backoff import NoBackoff
from redis.retry import Retry

from settings import Settings

CONNECT_TIMEOUT = 1.0
SOCKET_TIMEOUT = 5.0
# Huey's BRPOP timeout: how soon a consumer stopping gracefully (SIGINT) notices; SIGTERM does not
# wait for it. Each of the consumer's 4 threads asks Redis again this often while the queue is empty,
# on every node (issue 33: 1 s was 16 BRPOPs a second on 4 idle nodes).
READ_TIMEOUT = 5


class PrefixedRedisStorage(RedisStorage):
    """Huey's RedisStorage with its keys under Lanner's prefix."""

    def __init__(self, name: str = "huey", prefix: str = "lanner:", **kwargs) -> None:
        super().__init__(name, **kwargs)
        base = f"{prefix}huey:"
        self.queue_key = f"{base}queue"
        self.schedule_key = f"{base}schedule"
        self.result_key = f"{base}results"
        self.counter_key = f"{base}counters"
        self.notify_prefix = f"{base}notify:"

    def convert_ts(self, ts) -> float:
        # Huey (utc=True) hands naive UTC datetimes; its RedisStorage reads them with time.mktime, as
        # local time, so two nodes in different timezones would disagree by hours on when a retry is due.
        return calendar.timegm(ts.timetuple()) + ts.microsecond * 1e-6

    def close(self) -> bool:
        self.pool.disconnect()
        return True


class LannerRedisHuey(RedisHuey):
    storage_class = PrefixedRedisStorage


def create_redis_huey(settings: Settings, *, is_consumer: bool = False) -> LannerRedisHuey:
    """Huey on the cluster's Redis; `is_consumer`: for `lanner worker`'s consumer, whose BRPOP
    holds a connection READ_TIMEOUT before Redis answers."""
    pool = redis.ConnectionPool.from_url(
        settings.redis_url,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT + (READ_TIMEOUT if is_consumer else 0),
        retry=Retry(NoBackoff(), 1),  # One retry: a connection Redis dropped (a restart) is made again.
    )
    return LannerRedisHuey(
        name="lanner",
        results=False,
        utc=True,
        prefix=settings.redis_prefix,
        connection_pool=pool,
        read_timeout=READ_TIMEOUT,
    )
