"""`lanner label`: sub id values (zones ...) whitelisted or blacklisted, and their lists for a source."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows

LABEL_COLUMNS = ["id", "scope", "scope_name", "parameter", "slot", "value", "label", "rule_id"]


def scope_options(function):
    """--campaign/--source/--param: whose values, and which parameter's."""
    options = (
        click.option("--campaign", "campaign_ref", help="Campaign id or alias: its own labels."),
        click.option(
            "--source", "source_ref", help="Traffic source id or name: labels for all its campaigns."
        ),
        click.option(
            "--param",
            "parameter",
            required=True,
            help="The source's parameter name (zoneid) or the slot (sub_id_1 … sub_id_30).",
        ),
    )
    for option in reversed(options):
        function = option(function)
    return function


def _values(values: tuple[str, ...], from_file) -> list[str]:
    listed = list(values)
    if from_file is not None:
        listed += [line.strip() for line in from_file.read().splitlines() if line.strip()]
    return listed


@click.group()
def label() -> None:
    """Whitelist or blacklist sub id values (zones, sites ...) per campaign or traffic source."""


@label.command("set")
@scope_options
@click.option("--blacklist", "label_name", flag_value="blacklist", help="Blacklist the values.")
@click.option("--whitelist", "label_name", flag_value="whitelist", help="Whitelist the values.")
@click.option("--file", "from_file", type=click.File(), help="Also the values in this file, one a line.")
@click.argument("values", nargs=-1)
@pass_context
def label_set(
    ctx: Context,
    campaign_ref: str | None,
    source_ref: str | None,
    parameter: str,
    label_name: str | None,
    from_file,
    values: tuple[str, ...],
) -> None:
    """Label VALUES (a value labelled otherwise is relabelled)."""
    from models.optimisation.labels import scope_of, set_labels

    if label_name is None:
        raise click.UsageError("Give --blacklist or --whitelist.")
    scope = scope_of(ctx.db, campaign_ref, source_ref, parameter)
    changed = set_labels(ctx.db, scope, _values(values, from_file), label_name)
    click.echo(f"{changed} value(s) of {scope.parameter} {label_name}ed in {scope.scope} {scope.name}.")


@label.command("remove")
@scope_options
@click.option("--file", "from_file", type=click.File(), help="Also the values in this file, one a line.")
@click.argument("values", nargs=-1)
@pass_context
def label_remove(
    ctx: Context,
    campaign_ref: str | None,
    source_ref: str | None,
    parameter: str,
    from_file,
    values: tuple[str, ...],
) -> None:
    """Take the labels off VALUES."""
    from models.optimisation.labels import remove_labels, scope_of

    scope = scope_of(ctx.db, campaign_ref, source_ref, parameter)
    removed = remove_labels(ctx.db, scope, _values(values, from_file))
    click.echo(f"{removed} label(s) removed from {scope.parameter} in {scope.scope} {scope.name}.")


@label.command("list")
@click.option("--campaign", "campaign_ref", help="A campaign's labels and its traffic source's.")
@click.option("--label", "label_name", type=click.Choice(["whitelist", "blacklist"]))
@format_option
@pass_context
def label_list(ctx: Context, campaign_ref: str | None, label_name: str | None, fmt: str) -> None:
    """The labels, by scope, parameter and value."""
    from models.admin.rows import get_campaign
    from models.optimisation.labels import list_labels

    ids = [get_campaign(ctx.db, campaign_ref).id] if campaign_ref else None
    echo_rows(list_labels(ctx.db, campaign_ids=ids, label=label_name), LABEL_COLUMNS, fmt)


@label.command("export")
@scope_options
@click.option(
    "--blacklist", "label_name", flag_value="blacklist", default=True, help="The blacklist (default)."
)
@click.option("--whitelist", "label_name", flag_value="whitelist", help="The whitelist.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["plain", "comma", "csv"]),
    default="plain",
    show_default=True,
    help="plain: one value a line; comma: one comma-separated line; csv: with a header.",
)
@click.option(
    "--push",
    is_flag=True,
    help="Send the blacklist to the source instead: exclude its zones in the platform campaigns the "
    "source's PropellerAds spend connection maps (onto the campaign).",
)
@pass_context
def label_export(
    ctx: Context,
    campaign_ref: str | None,
    source_ref: str | None,
    parameter: str,
    label_name: str,
    fmt: str,
    push: bool,
) -> None:
    """The values labelled so, as an ad network's black or white list takes them (or, with --push, the
    blacklist sent to the source by its API)."""
    from models.optimisation.labels import export_labels, scope_of
    from models.optimisation.sourcepause import SourceAccess, push_blacklist

    scope = scope_of(ctx.db, campaign_ref, source_ref, parameter)
    if not push:
        click.echo(export_labels(ctx.db, scope, label_name, fmt), nl=False)
        return
    if label_name != "blacklist":
        raise click.ClickException(
            "Only a blacklist is pushed: a source's whitelist would stop every other zone."
        )
    pushed = push_blacklist(scope, SourceAccess.from_settings(ctx.settings))
    for campaign_id, said in pushed.campaigns.items():
        click.echo(f"Campaign {campaign_id}: {said}")
    if pushed.not_zone_ids:
        click.echo(f"Not zone ids, not sent: {', '.join(pushed.not_zone_ids)}", err=True)
