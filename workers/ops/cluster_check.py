"""`lanner cluster check`: whether this host can join a cluster, before its services start.

scripts/install.sh --join runs it on a further host once its environment file points at the first
host's PostgreSQL and Redis, and stops with its one sentence if the answer is no. Asked here rather
than left to `lanner serve`: a node that cannot reach PostgreSQL still answers clicks (they wait in
its spool), so a wrong URL or password would otherwise show only as a growing backlog.
"""

from __future__ import annotations

from settings import Settings


def join_problem(settings: Settings) -> str | None:
    """Why this host cannot join the cluster its settings name, in one sentence; None: it can."""
    from peewee import DatabaseError

    from models.clicks.node import spool_node
    from models.cluster.shared_state import redis_health
    from models.errors import LannerError
    from models.store.clicks import ClickStore
    from models.store.database import db as database
    from models.store.database import open_database

    if not settings.uses_postgres:
        return (
            "LANNER_DATABASE_URL is not a postgresql:// URL: a cluster's nodes share the first host's "
            "PostgreSQL."
        )
    if not settings.redis_url:
        return "LANNER_REDIS_URL is empty: a cluster's nodes share the first host's Redis."
    try:
        nodes = ClickStore(open_database(settings.database_location).connection()).nodes()
    except LannerError as error:  # Unreachable, or a wrong password: its own sentence.
        return str(error)
    except DatabaseError as error:  # Reached, but no Lanner schema in it (no spool_node table).
        return (
            f"The database {settings.database_shown} has no Lanner tables ({str(error).splitlines()[0]}): "
            "run `scripts/install.sh --cluster` on the first host first."
        )
    finally:
        database.close()
    health = redis_health(settings.redis_url)
    if health["state"] != "ok":
        return (
            f"Cannot reach Redis at {health['url']} ({health['error']}): is it running, and is the "
            "password right?"
        )
    mine = spool_node(settings.spool_dir)
    rejoining = mine.spool_id and mine.name == settings.node_id  # This data dir is that node: a re-run.
    if settings.node_id in {row[0] for row in nodes} and not rejoining:
        return (
            f"A node named {settings.node_id!r} is already in the database (spool_node): give this host "
            "another name (scripts/install.sh --node-id NAME, or LANNER_NODE_ID)."
        )
    return None
