"""`lanner status`'s cluster part: Redis's health (LANNER_REDIS_URL) and PostgreSQL's (a postgresql://
database).

What this process can tell: whether Redis answers it now, a PING's round trip, Redis's memory and when each
cluster-wide sweep last ran. A web worker's own view (SharedState.status()) is in that worker; when Redis
does not answer here, the nodes' workers are most likely going on alone too, which `clicks` says.
Never a password: URLs are shown without theirs, and an error that quotes one has it masked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from settings import Settings

if TYPE_CHECKING:
    from peewee import Database

ALONE = (
    "while Redis does not answer a node, its clicks use that node's own debounce and uniqueness, and "
    "capped streams and offers get no clicks"
)
# Sweeps of the shared database that one node runs per tick (workers/runtime/tasks.py, cluster_wide).
CLUSTER_SWEEPS = ["send_due_postbacks", "run_deferred_steps", "prune_postback_log", "refresh_exchange_rates"]


def masked(text: object, secret: str | None) -> str:
    """One line, without the secret."""
    line = " ".join(str(text).split())
    return line.replace(secret, "***") if secret else line


def redis_secret(url: str) -> str | None:
    from redis.connection import parse_url

    return parse_url(url).get("password")


def redis_status(settings: Settings, *, timeout: float = 0.5) -> dict[str, Any]:
    import redis

    from models.cluster.shared_state import redis_health
    from models.cluster.sweeps import ClusterSweeps

    url = settings.redis_url
    secret = redis_secret(url)
    health = redis_health(url, timeout=timeout)
    if "error" in health:
        health["error"] = masked(health["error"], secret)
    if health["state"] != "ok":
        health["clicks"] = ALONE
        return health
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        health["sweeps"] = ClusterSweeps(client, settings.redis_prefix, settings.node_id).last_runs(
            CLUSTER_SWEEPS
        )
    except redis.RedisError as error:
        health["sweeps"] = {"error": masked(error, secret)}
    finally:
        client.close()
    return health


def postgres_status(db: Database) -> dict[str, Any]:
    """The server this process is connected to (no statement: libpq's connection parameters)."""
    info = db.connection().info
    return {
        "state": "ok",
        "server_version": info.parameter_status("server_version"),
        "host": info.host,
        "port": info.port,
        "database": info.dbname,
    }


def postgres_unreachable(error: BaseException | str) -> dict[str, Any]:
    """What `lanner status` shows when PostgreSQL cannot be reached (psycopg's messages name no password)."""
    return {"state": "unreachable", "error": masked(error, None)}


def cluster_status(settings: Settings, db: Database) -> dict[str, Any]:
    """The `redis` and `postgresql` keys of `lanner status`, each only when that server is configured."""
    status: dict[str, Any] = {}
    if settings.uses_postgres:
        status["postgresql"] = postgres_status(db)
    if settings.redis_url:
        status["redis"] = redis_status(settings)
    return status
