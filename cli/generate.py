"""`lanner generate`: synthetic data for benchmarks and rehearsals."""

from __future__ import annotations

import sys

import click

from cli.context import Context, pass_context


@click.group()
def generate() -> None:
    """Synthetic data for benchmarks and rehearsals."""


@generate.command("clicks")
@click.option("--count", type=int, required=True, help="How many clicks to add.")
@click.option(
    "--days", type=float, default=30, show_default=True, help="Spread them over this many days to now."
)
@click.option(
    "--ending-hours-ago",
    type=float,
    default=0,
    show_default=True,
    help="End the spread this many hours before now (build older and recent traffic separately).",
)
@click.option("--campaigns", type=int, default=20, show_default=True)
@click.option("--seed", type=int, help="Seed for a reproducible data set.")
@pass_context
def generate_clicks_command(
    ctx: Context, count: int, days: float, ending_hours_ago: float, campaigns: int, seed: int | None
) -> None:
    """Fill the database with realistic clicks: repeat visitors, NAT IPs shared by many UAs."""
    import time

    from workers.bench.generate import generate_clicks

    if count <= 0 or days <= 0 or ending_hours_ago < 0:
        raise click.ClickException("--count and --days must be positive, --ending-hours-ago not negative.")
    end_ms = int((time.time() - ending_hours_ago * 3600) * 1000)
    started = time.monotonic()
    with click.progressbar(length=count, label="Generating clicks", file=sys.stderr) as bar:
        added = generate_clicks(
            ctx.db,
            count,
            days,
            campaigns=campaigns,
            seed=seed,
            end_ms=end_ms,
            global_uniqueness_hours=ctx.settings.uniqueness_hours,
            on_progress=bar.update,
        )
    elapsed = time.monotonic() - started
    click.echo(f"Added {added} clicks in {elapsed:.1f} s ({added / elapsed:,.0f}/s).")
