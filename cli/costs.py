"""`lanner cost`: spend spread over clicks."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.options import format_option, range_options
from cli.output import echo_rows, progress_to_total


@click.group()
def cost() -> None:
    """Spend spread over the clicks of a campaign or a traffic source (per zone or sub id value too)."""


COST_ENTRY_COLUMNS = [
    "id",
    "scope",
    "filters",
    "since",
    "until",
    "timezone",
    "amount",
    "currency",
    "report_amount",
    "clicks",
    "unpaid_clicks",
]


@cost.command("set")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--source", "source_ref", help="Traffic source id or name: all its campaigns' clicks instead.")
@range_options(required=True)
@click.option("--amount", type=float, required=True, help="The total spend for the period.")
@click.option(
    "--currency",
    help="The amount's currency (default: the campaign's cost currency; for --source the report currency).",
)
@click.option(
    "--sub-id",
    "sub_ids",
    multiple=True,
    help="Only the clicks with this value, by the source's name or the slot: zoneid=123, sub_id_3=abc "
    "(repeatable; all must match).",
)
@click.option("--include-bots", is_flag=True, help="Spread over bot clicks too (by default they get cost 0).")
@click.option("--unique-only", is_flag=True, help="Spread over unique clicks only (repeats get cost 0).")
@pass_context
def cost_set(
    ctx: Context,
    campaign_ref: str | None,
    source_ref: str | None,
    since: str,
    until: str,
    amount: float,
    timezone: str,
    currency: str | None,
    sub_ids: tuple[str, ...],
    include_bots: bool,
    unique_only: bool,
) -> None:
    """Replace the costs of a campaign's (or a traffic source's) clicks in a period with AMOUNT spread
    evenly over them."""
    from models.admin.services import get_campaign
    from models.admin.sources import get_source
    from models.reporting.costs import cost_request, cost_scope, parse_sub_ids, set_cost

    if (campaign_ref is None) == (source_ref is None):
        raise click.UsageError("Give --campaign or --source (one of them).")
    scope = cost_scope(
        ctx.db,
        campaign=get_campaign(ctx.db, campaign_ref) if campaign_ref else None,
        source=get_source(ctx.db, source_ref) if source_ref else None,
        sub_ids=parse_sub_ids(sub_ids),
    )
    request = cost_request(
        ctx.db,
        scope,
        since,
        until,
        amount,
        currency=currency,
        timezone=timezone,
        include_bots=include_bots,
        unique_only=unique_only,
    )
    with progress_to_total("Spreading") as advance:
        spread = set_cost(ctx.db, request, on_progress=advance)
    report = spread.report_currency
    converted = "" if spread.currency == report else f" ({spread.report_amount:g} {report})"
    unpaid = ""
    if spread.unpaid_clicks:
        which = "bot or repeat" if unique_only else "bot"
        unpaid = f"; {spread.unpaid_clicks:,} {which} clicks at 0"
    click.echo(
        f"{amount:g} {spread.currency}{converted} over {spread.clicks:,} clicks "
        f"({spread.per_click:g} {report} each){unpaid}."
    )


@cost.command("list")
@click.option("--campaign", "campaign_ref", help="Only the sets of this campaign (and of its source).")
@click.option("--source", "source_ref", help="Only the sets of this traffic source and its campaigns.")
@format_option
@pass_context
def cost_list(ctx: Context, campaign_ref: str | None, source_ref: str | None, fmt: str) -> None:
    """The costs set, newest first, each with its scope (a set covered by a later one is dropped)."""
    from models.admin.services import get_campaign
    from models.admin.sources import get_source
    from models.reporting.costs import cost_entries

    entries = cost_entries(
        ctx.db,
        campaign_ids=[get_campaign(ctx.db, campaign_ref).id] if campaign_ref else None,
        source_id=get_source(ctx.db, source_ref).id if source_ref else None,
    )
    if fmt != "json":
        entries = [{**e, "filters": e["label"]} for e in entries]
    echo_rows(entries, COST_ENTRY_COLUMNS, fmt)
