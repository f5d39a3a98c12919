"""`lanner cluster`: whether this host can join a cluster."""

from __future__ import annotations

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
