"""`lanner offer`: offers, the URL templates campaigns send to."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.currency import echo_rate_warnings
from cli.options import cap_options, format_option
from cli.output import echo_rows
from models import choices
from models.admin.views import offer_fields


@click.group()
def offer() -> None:
    """Offers: URL templates with macros such as {subid}."""


@offer.command("create")
@click.argument("name")
@click.option("--url", required=True, help="Offer URL template, e.g. https://example.com/?click={subid}")
@click.option("--payout", type=float, default=0.0, show_default=True)
@click.option("--currency", help="The payout's currency, e.g. EUR (default: the report currency).")
@cap_options
@click.option("--timezone", default="UTC", show_default=True, help="Where the daily cap's day starts.")
@click.option("--network", help="The affiliate network paying for it (its alias or id).")
@pass_context
def offer_create(ctx: Context, name: str, url: str, **options: Any) -> None:
    """Create an offer; prints its id."""
    from models.admin.services import create_offer

    network_option(ctx, options)
    created = create_offer(ctx.db, name, url, **options)
    click.echo(created.id)
    echo_rate_warnings(ctx, created.currency)


def network_option(ctx: Context, options: dict[str, Any]) -> None:
    """--network ALIAS|ID as the services take it: network_id ('' on update: clear_network)."""
    from models.conversions.networks import get_network

    ref = options.pop("network")
    if ref == "" and "clear_network" in options:
        options["clear_network"] = True
    elif ref is not None:
        options["network_id"] = get_network(ctx.db, ref).id


@offer.command("list")
@format_option
@pass_context
def offer_list(ctx: Context, fmt: str) -> None:
    """List offers."""
    from models.admin.services import list_offers

    columns = [
        "id",
        "name",
        "status",
        "payout",
        "currency",
        "daily_cap",
        "total_cap",
        "timezone",
        "network_id",
        "url",
    ]
    echo_rows([offer_fields(o) for o in list_offers(ctx.db)], columns, fmt)


@offer.command("update")
@click.argument("offer_id", type=int)
@click.option("--name")
@click.option("--url")
@click.option("--status", type=click.Choice(choices.OFFER_STATUSES))
@click.option("--payout", type=float)
@click.option("--currency", help="The payout's currency, e.g. EUR.")
@cap_options
@click.option("--clear-caps", is_flag=True, help="Remove both caps.")
@click.option("--timezone")
@click.option("--network", help="Its affiliate network (alias or id); '' for none.")
@pass_context
def offer_update(ctx: Context, offer_id: int, **changes: Any) -> None:
    """Change an offer."""
    from models.admin.services import update_offer

    changes["clear_network"] = False
    network_option(ctx, changes)
    updated = update_offer(ctx.db, offer_id, **changes)
    click.echo(f"Offer {updated.id} updated.")
    if changes.get("currency"):
        echo_rate_warnings(ctx, updated.currency)
