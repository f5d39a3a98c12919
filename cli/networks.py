"""`lanner network`: affiliate networks, their postback macros and status words."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text
from models import choices


@click.group()
def network() -> None:
    """Affiliate networks: their postback macros and status words (`from=` is the alias)."""


def network_macro_options(function):
    """The network's macro for each postback parameter, what offer URLs add and how its statuses change
    (None: unchanged)."""
    options = [
        click.option("--subid-macro", help="The network's macro for the subid it was sent, e.g. {sub1}."),
        click.option("--payout-macro", help="Its macro for the payout, e.g. {sum} ('' for none)."),
        click.option("--status-macro", help="Its macro for the status word, e.g. {status} ('' for none)."),
        click.option("--tid-macro", help="Its macro for the transaction id ('' for none)."),
        click.option("--currency-macro", help="Its macro for the payout's currency ('' for none)."),
        click.option("--offer-params", help="What its offer URLs add to send the subid, e.g. sub1={subid}."),
        click.option("--notes"),
        click.option(
            "--status-changes",
            type=click.Choice(choices.NETWORK_STATUS_CHANGES),
            help="Which status changes its postbacks may make: forward (lead → sale/rejected/trash, "
            "sale → rejected) or any (it corrects itself either way: rejected → approved ...).",
        ),
        click.option(
            "--rebills",
            type=click.Choice(choices.NETWORK_REBILLS),
            help="How it sends rebills: own_tid (a rebill status with a tid of its own) or repeat_sale "
            "(another approved postback with a new tid: a click's second sale is a rebill).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def echo_network_urls(network) -> None:
    from models.conversions.networks import postback_url
    from models.conversions.postbacks import read_secret

    # The operator's CLI, as `lanner postback key show`: the key is the install's.
    key = read_secret(network._meta.database, "postback_key")
    click.echo(f"postback URL: {postback_url(network, 'https://YOUR-DOMAIN', key)}")
    if network.offer_params:
        click.echo(f"offer URLs add: {network.offer_params}")


@network.command("create")
@click.argument("name")
@click.option("--alias", help="Its from= value in postbacks (default: the name in lowercase).")
@click.option("--template", "from_template", help="A catalogue entry's key (`lanner network catalogue`).")
@network_macro_options
@pass_context
def network_create(ctx: Context, name: str, **options: Any) -> None:
    """Create a network (from a catalogue template, or with --subid-macro); prints its postback URL."""
    from models.conversions.networks import create_network

    created = create_network(ctx.db, name, **options)
    click.echo(f"Network {created.id} ({created.alias}) created.", err=True)
    echo_network_urls(created)


@network.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Archived networks too.")
@format_option
@pass_context
def network_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List networks."""
    from models.admin.views import network_fields
    from models.conversions.networks import list_networks, offer_counts

    counts = offer_counts(ctx.db)
    listed = list_networks(ctx.db, include_archived=include_archived)
    rows = [network_fields(n) | {"offers": counts.get(n.id, 0)} for n in listed]
    columns = [
        "id",
        "alias",
        "name",
        "status",
        "offers",
        "subid_macro",
        "payout_macro",
        "status_macro",
        "tid_macro",
        "currency_macro",
    ]
    echo_rows(rows, columns, fmt)


@network.command("show")
@click.argument("ref")
@format_option
@pass_context
def network_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a network (by alias or id): its postback URL and status maps."""
    from models.admin.views import network_fields
    from models.conversions.networks import get_network, network_status_maps, postback_url
    from models.conversions.postbacks import read_secret

    found = get_network(ctx.db, ref)
    data = network_fields(found)
    data["postback_url"] = postback_url(found, "https://YOUR-DOMAIN", read_secret(ctx.db, "postback_key"))
    maps = network_status_maps(ctx.db, found)
    data["status_maps"] = [{"word": m["raw_status"], "status": m["status"]} for m in maps]
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key != "status_maps":
            click.echo(f"{key}: {value}")
    click.echo("status maps (`lanner postback status map WORD STATUS --network ALIAS`):")
    echo_rows(data["status_maps"], ["word", "status"], "table")


@network.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--status", type=click.Choice(choices.NETWORK_STATUSES))
@network_macro_options
@pass_context
def network_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a network (its alias stays: the URL pasted into the network carries it)."""
    from models.conversions.networks import update_network

    updated = update_network(ctx.db, ref, **changes)
    click.echo(f"Network {updated.id} ({updated.alias}) updated.")


@network.command("delete")
@click.argument("ref")
@pass_context
def network_delete(ctx: Context, ref: str) -> None:
    """Delete a network no offer belongs to (its status maps stay, as the maps of its alias)."""
    from models.conversions.networks import delete_network

    delete_network(ctx.db, ref)
    click.echo(f"Network {ref} deleted.")


@network.command("catalogue")
@format_option
def network_catalogue(fmt: str) -> None:
    """The bundled templates (`network create NAME --template KEY`): a starting point to check."""
    from dataclasses import asdict

    from models.conversions.networks import catalogue, catalogue_note

    rows = [
        asdict(entry) | {"statuses": ",".join(f"{w}={s}" for w, s in entry.statuses.items())}
        for entry in catalogue().values()
    ]
    columns = [
        "key",
        "name",
        "subid_macro",
        "payout_macro",
        "status_macro",
        "tid_macro",
        "currency_macro",
        "offer_params",
        "statuses",
        "source",
    ]
    echo_rows(rows, columns, fmt)
    if fmt == "table":
        click.echo(catalogue_note(), err=True)
