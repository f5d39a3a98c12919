"""`lanner bots`: the crawler networks the bot decision uses."""

from __future__ import annotations

import click

from cli.context import Context, pass_context


@click.group()
def bots() -> None:
    """The bot decision's data: the crawler networks the large platforms publish."""


@bots.command("update")
@pass_context
def bots_update(ctx: Context) -> None:
    """Fetch the published crawler networks (LANNER_BOT_RANGE_SOURCES) into the ranges file; running
    workers use it within a second. A source that fails or shrank by half keeps its previous networks."""
    from models.lookups.crawlerranges import update_ranges

    path = ctx.settings.bot_ranges_path
    if path is None:
        raise click.ClickException("LANNER_BOT_RANGES is off, so there is no ranges file to update.")
    report = update_ranges(ctx.settings.bot_range_sources, path)
    for line in report.lines:
        click.echo(line)
    data = report.data
    assert data is not None  # update_ranges always leaves the data it wrote (or kept) in its report.
    click.echo(f"{data.network_count} networks from {len(data.sources)} sources written to {path}.")
    if report.failed:
        raise click.ClickException(
            f"{len(report.failed)} source(s) not updated ({', '.join(report.failed)}): "
            "they keep their previous networks."
        )
