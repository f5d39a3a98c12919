"""`lanner cluster`: whether this host can join a cluster."""

from __future__ import annotations

from pathlib import Path

import click

from cli.context import Context, pass_context


@click.group()
def cluster() -> None:
    """Cluster mode: several nodes on one PostgreSQL and one Redis (docs/SCALING.md)."""


@cluster.command("check")
@pass_context
def cluster_check(ctx: Context) -> None:
    """Whether this host can join: PostgreSQL and Redis answer, and LANNER_NODE_ID is not another node's."""
    from workers.ops.cluster_check import join_problem

    problem = join_problem(ctx.settings)
    if problem:
        raise click.ClickException(problem)
    click.echo(f"node {ctx.settings.node_id}: PostgreSQL and Redis answer; the name is free.")


@cluster.command("up")
@click.option("--nodes", type=click.IntRange(min=1), default=2, show_default=True, help="How many nodes.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the nodes' data directories and logs go (kept after); default: a temporary one, removed.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="nginx's, on 127.0.0.1; 0: a free one.",
)
def cluster_up(nodes: int, directory: Path | None, port: int) -> None:
    """Start a local N-node cluster for trying it: a throwaway PostgreSQL and Redis, N nodes, nginx in
    front, a demo campaign; runs until Ctrl-C or `lanner cluster down` (docs/cluster.md)."""
    from models.store.drivers import allow_postgres_drivers

    if not allow_postgres_drivers():  # Its own PostgreSQL, whatever LANNER_DATABASE_URL says.
        raise click.ClickException("`lanner cluster up` needs psycopg, which this process could not load.")
    from workers.bench.errors import BenchError
    from workers.bench.localcluster import run_cluster

    try:
        run_cluster(directory, nodes, port, lambda line: click.echo(line))
    except BenchError as exc:
        raise click.ClickException(str(exc)) from None


@cluster.command("down")
@click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The --dir the cluster was started with.",
)
def cluster_down(directory: Path) -> None:
    """Stop the cluster `lanner cluster up --dir DIR` started, and everything it runs."""
    from workers.bench.errors import BenchError
    from workers.bench.localcluster import stop_cluster

    try:
        stop_cluster(directory, lambda line: click.echo(line))
    except BenchError as exc:
        raise click.ClickException(str(exc)) from None
