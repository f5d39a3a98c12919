"""`lanner source`: traffic sources (a campaign URL's parameters, sub ids, postback)."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text
from models import choices

SOURCE_COLUMNS = ["id", "name", "status", "campaigns", "template", "postback_url"]


def source_options(function):
    """What `source create` and `source update` both take (None = unchanged)."""
    options = [
        click.option(
            "--template",
            help="The campaign URL's parameters: 'zoneid={zoneid}&cost={cost}&external_id={clickid}'.",
        ),
        click.option(
            "--slot",
            "slots",
            multiple=True,
            help="NAME=N: the sub_id slot a name fills (default: the next free).",
        ),
        click.option("--postback", "postback_url", help="Outbound postback template; '' sends none."),
        click.option(
            "--postback-status",
            "postback_statuses",
            multiple=True,
            type=click.Choice(choices.CONVERSION_STATUSES),
            help="A status its postback is sent for (repeatable; default sale).",
        ),
        click.option("--postback-method", type=click.Choice(choices.POSTBACK_METHODS)),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def source_slots(options: dict[str, Any]) -> None:
    """--slot NAME=N as the services take it."""
    from models.routing.sources import SourceError, parse_slots

    try:
        options["slots"] = parse_slots(options.pop("slots")) or None
    except SourceError as exc:
        raise click.ClickException(str(exc)) from None
    options["postback_statuses"] = options["postback_statuses"] or None


@click.group()
def source() -> None:
    """Traffic sources: a campaign URL's parameters, sub id mapping and postback, per ad network."""


@source.command("create")
@click.argument("name")
@click.option("--from-catalogue", help="Start from a catalogue entry (`lanner source catalogue`).")
@source_options
@pass_context
def source_create(ctx: Context, name: str, **options: Any) -> None:
    """Create a traffic source; prints its id and parameters."""
    from models.admin.sources import create_source, source_fields

    source_slots(options)
    created = create_source(
        ctx.db, name, options.pop("template") or "", **{k: v for k, v in options.items() if v is not None}
    )
    echo_source(source_fields(created, 0), "table")


def echo_source(data: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key != "parameters":
            click.echo(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    click.echo("parameters:")
    echo_rows(data["parameters"], ["name", "placeholder", "field"], "table")


@source.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived sources.")
@format_option
@pass_context
def source_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List traffic sources."""
    from models.admin.sources import campaign_counts, list_sources, source_fields

    counts = campaign_counts(ctx.db)
    listed = list_sources(ctx.db, include_archived=include_archived)
    rows = [source_fields(s, counts.get(s.id, 0)) for s in listed]
    echo_rows(rows, SOURCE_COLUMNS, fmt)


@source.command("show")
@click.argument("ref")
@format_option
@pass_context
def source_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a traffic source (by id or name) with its parameters."""
    from models.admin.sources import campaign_counts, get_source, source_fields

    found = get_source(ctx.db, ref)
    data = source_fields(found, campaign_counts(ctx.db).get(found.id, 0))
    if fmt == "csv":
        echo_rows(data["parameters"], ["name", "placeholder", "field"], "csv")
        return
    echo_source(data, fmt)


@source.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--status", type=click.Choice(choices.SOURCE_STATUSES))
@source_options
@pass_context
def source_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a traffic source (--slot alone re-maps names of its current template)."""
    from models.admin.sources import update_source

    source_slots(changes)
    updated = update_source(ctx.db, ref, **changes)
    click.echo(f"Traffic source {updated.id} updated.")


@source.command("delete")
@click.argument("ref")
@pass_context
def source_delete(ctx: Context, ref: str) -> None:
    """Delete a traffic source no campaign uses (archive one that is used)."""
    from models.admin.sources import delete_source

    delete_source(ctx.db, ref)
    click.echo(f"Traffic source {ref} deleted.")


@source.command("catalogue")
@format_option
def source_catalogue(fmt: str) -> None:
    """The bundled catalogue of common sources: starting points to check against each network's docs."""
    from models.admin.sources import catalogue

    data = catalogue()
    rows = [{**entry, "kinds": ",".join(entry["kinds"])} for entry in data["sources"]]
    if fmt == "json":
        click.echo(json_text(data))
        return
    if fmt == "table":
        click.echo(data["about"] + "\n")
    echo_rows(rows, ["key", "name", "kinds", "template", "postback"], fmt)
