"""`lanner status` and `lanner settings`: how the install runs, and what it is configured with."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text
from settings import Settings


@click.command("settings")
@format_option
@pass_context
def settings_command(ctx: Context, fmt: str) -> None:
    """Show every LANNER_* setting with its current value (secrets: only whether they are set)."""
    from settings import shown_settings

    echo_rows(shown_settings(ctx.settings), ["env", "value", "default", "help"], fmt)


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def status_command(ctx: Context, as_json: bool) -> None:
    """Web master and workers, spool depth and last flush, queue depth, database size, geo file, the
    crawler ranges' date; in cluster mode Redis's and PostgreSQL's health, and while PostgreSQL does
    not answer, the clicks waiting in this node's spool and the oldest one's age."""
    from workers.ops.status import collect_status

    unreachable: tuple[type[Exception], ...] = ()
    if ctx.settings.uses_postgres:
        from models.store.database import PostgresUnreachable

        unreachable = (PostgresUnreachable,)
    try:
        database = ctx.db
    except unreachable as exc:  # Say so, with Redis's health, which needs no database.
        echo_unreachable_database(ctx.settings, str(exc), as_json)
        raise SystemExit(1) from None
    status = collect_status(ctx.settings, database)
    if as_json:
        click.echo(json_text(status))
        return
    web = status["web"]
    if web["running"]:
        click.echo(f"web: master {web['master_pid']} up {web['uptime_s']} s, {len(web['workers'])} worker(s)")
        echo_rows(web["workers"], ["pid", "role", "uptime_s", "rss_mb"], "table")
    else:
        click.echo("web: not running" + (" (stale pid file)" if web.get("stale_pid_file") else ""))
    click.echo(describe_consumer(status["consumer"]))
    if len(status["nodes"]) > 1:  # Cluster mode: every node's heartbeat and backlog.
        echo_rows(status["nodes"], list(status["nodes"][0]), "table")
    for section in (
        "spool",
        "queue",
        "database",
        "postgresql",
        "redis",
        "geo",
        "bot_ranges",
        "deferred",
        "postbacks",
        "alerts",
    ):
        if section == "geo":
            echo_geo_status(status["geo"])
        elif section == "redis" and section in status:
            echo_redis_status(status["redis"])
        elif section in status:
            click.echo(f"{section}: " + ", ".join(f"{k} {v}" for k, v in status[section].items()))


def echo_unreachable_database(settings: Settings, error: str, as_json: bool) -> None:
    """`lanner status` when PostgreSQL does not answer: that, the spool's backlog and Redis's health,
    which need no database."""
    from workers.ops.clusterstatus import postgres_unreachable, redis_status
    from workers.ops.status import outage_spool_status

    status = {"postgresql": postgres_unreachable(error), "spool": outage_spool_status(settings)}
    if settings.redis_url:
        status["redis"] = redis_status(settings)
    if as_json:
        click.echo(json_text(status))
        return
    click.echo(f"postgresql: unreachable, error {status['postgresql']['error']}")
    click.echo("spool: " + ", ".join(f"{k} {v}" for k, v in status["spool"].items()))
    if "redis" in status:
        echo_redis_status(status["redis"])


def echo_redis_status(redis: dict[str, Any]) -> None:
    """The `redis:` line (health as this process sees it), each web worker's own view (this node's, then
    the other nodes' as their `lanner worker` published them), then when each cluster-wide sweep last ran."""
    sweeps = redis.get("sweeps", {})
    hidden = ("state", "sweeps", "clicks", "node", "workers", "other_nodes")
    shown = {k: v for k, v in redis.items() if k not in hidden}
    click.echo(f"redis: {redis['state']}, " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    if "clicks" in redis:
        click.echo(f"  ! {redis['clicks']}")
    for view in redis.get("workers", ()):
        click.echo(f"  web worker {view['pid']} on node {redis['node']}: " + describe_worker_view(view))
    others = redis.get("other_nodes", {})
    if "error" in others:
        click.echo(f"  other nodes' web workers: {others['error']}")
        others = {}
    for node, published in others.items():
        for view in published["workers"]:
            ago = published["published_s_ago"]
            described = describe_worker_view(view)
            click.echo(f"  web worker {view['pid']} on node {node} (published {ago} s ago): {described}")
    if "error" in sweeps:
        click.echo(f"  sweeps: {sweeps['error']}")
        return
    for name, run in sweeps.items():
        last = (
            "never"
            if run["last_run_s_ago"] is None
            else f"{run['last_run_s_ago']} s ago on {run['last_node']}"
        )
        click.echo(f"  sweep {name}: last {last}, runs {run['runs']}, skipped {run['skipped']}")


def describe_worker_view(view: dict[str, Any]) -> str:
    """A web worker's own view of Redis, in words (workers/runtime/redisview.py)."""
    as_of = f" (as of {view['as_of_s_ago']} s ago)"
    if view["state"] == "degraded":
        return (
            f"degraded for {view['degraded_s']} s, {view['alone_clicks']} clicks answered alone, "
            f"error {view['last_error']}" + as_of
        )
    outage = view.get("last_outage")
    if outage:
        return (
            f"ok; its last outage ended {outage['ended_s_ago']} s ago after {outage['seconds']} s, "
            f"{outage['alone_clicks']} clicks answered alone"
        )
    return "ok"


def echo_geo_status(geo: dict[str, Any]) -> None:
    """The geo files, one line each, and a WARNING line for data past its age."""
    files = [("geo", geo), *((f"geo {name}", info) for name, info in geo.get("network", {}).items())]
    for label, info in files:
        shown = {k: v for k, v in info.items() if k not in ("network", "warning")}
        click.echo(f"{label}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
        if "warning" in info:
            click.echo(f"  WARNING: {info['warning']}")


def describe_consumer(consumer: dict[str, Any]) -> str:
    """The `consumer:` line of `lanner status`, then one line per problem."""

    def ago(key: str) -> str:
        value = consumer.get(key)
        return "never" if value is None else f"{value} s ago"

    lag = "unknown (the next line does not parse)" if consumer["lag_s"] is None else f"{consumer['lag_s']} s"
    if consumer["pid"] is None:
        line = f"consumer: {consumer['state']}, lag {lag}"
    else:
        line = (
            f"consumer: {consumer['state']}, pid {consumer['pid']} "
            f"{'alive' if consumer['alive'] else 'not running'}, heartbeat {ago('heartbeat_s_ago')}, "
            f"last attempt {ago('last_attempt_s_ago')}, last landed {ago('last_landed_s_ago')}, lag {lag}"
        )
    return "\n".join([line, *(f"  ! {problem}" for problem in consumer["problems"])])
