"""`lanner lander`: landing pages, remote or served from a zip."""

from __future__ import annotations

import os
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text

LANDER_COLUMNS = ["id", "name", "kind", "status", "streams", "url", "path", "notes"]


@click.group()
def lander() -> None:
    """Landing pages: a remote URL (with macros and {offer}) or a local zip served at /landers/."""


def read_lander_zip(ctx: Context, path: str | None) -> bytes | None:
    """A zip file's bytes, refused past LANNER_LANDER_MAX_BYTES before it is read."""
    from models.admin.landers import LanderFiles

    if path is None:
        return None
    files = LanderFiles.from_settings(ctx.settings)
    try:
        size = os.stat(path).st_size
        if size > files.max_bytes:
            raise files.too_big(size)
        with open(path, "rb") as source:
            return source.read(files.max_bytes + 1)
    except OSError as exc:
        raise click.ClickException(f"Cannot read {path}: {exc.strerror}.") from None


def lander_files(ctx: Context):
    from models.admin.landers import LanderFiles

    return LanderFiles.from_settings(ctx.settings)


@lander.command("create")
@click.argument("name")
@click.option("--url", help="A remote lander's URL template, e.g. https://lp.example/?s={subid}&o={offer}.")
@click.option(
    "--zip", "zip_path", type=click.Path(dir_okay=False), help="A local lander: a zip with index.html."
)
@click.option("--notes", default="")
@pass_context
def lander_create(ctx: Context, name: str, url: str | None, zip_path: str | None, notes: str) -> None:
    """Create a lander (--url or --zip); prints its id and where it is served."""
    from models.admin.landers import create_lander, lander_path

    if (url is None) == (zip_path is None):
        raise click.UsageError("Give --url (a remote lander) or --zip (a local one).")
    data = read_lander_zip(ctx, zip_path)
    created = create_lander(ctx.db, name, url=url, zip_data=data, files=lander_files(ctx), notes=notes)
    click.echo(f"Lander {created.id} ({created.name}) created: {created.url or lander_path(created)}")


@lander.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Archived landers too.")
@format_option
@pass_context
def lander_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List landers with how many streams send to each."""
    from models.admin.landers import lander_fields, lander_uses, list_landers

    uses = lander_uses(ctx.db)
    listed = list_landers(ctx.db, include_archived=include_archived)
    rows = [lander_fields(x, uses.get(x.id, [])) for x in listed]
    if fmt == "json":
        click.echo(json_text(rows))
        return
    echo_rows(rows, LANDER_COLUMNS, fmt)


@lander.command("show")
@click.argument("ref")
@format_option
@pass_context
def lander_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a lander (by name or id) and the streams sending to it."""
    from models.admin.landers import get_lander, lander_fields, lander_uses

    found = get_lander(ctx.db, ref)
    data = lander_fields(found, lander_uses(ctx.db).get(found.id, []))
    if fmt == "json":
        click.echo(json_text(data))
        return
    if fmt == "csv":
        echo_rows(data["uses"], ["campaign_id", "campaign", "stream_id", "stream", "weight"], "csv")
        return
    for key, value in data.items():
        if key != "uses":
            click.echo(f"{key}: {'' if value is None else value}")
    click.echo("used by:")
    echo_rows(data["uses"], ["campaign", "stream_id", "stream", "weight"], "table")


@lander.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--url", help="A new URL (the lander becomes remote).")
@click.option("--zip", "zip_path", type=click.Path(dir_okay=False), help="A new zip (swapped in at once).")
@click.option("--notes")
@click.option("--status", type=click.Choice(["active", "archived"]))
@pass_context
def lander_update(ctx: Context, ref: str, zip_path: str | None, **changes: Any) -> None:
    """Change a lander; a new zip replaces its files in one step."""
    from models.admin.landers import update_lander

    data = read_lander_zip(ctx, zip_path)
    updated = update_lander(ctx.db, ref, zip_data=data, files=lander_files(ctx), **changes)
    click.echo(f"Lander {updated.id} ({updated.name}) updated.")


@lander.command("archive")
@click.argument("ref")
@pass_context
def lander_archive(ctx: Context, ref: str) -> None:
    """Archive a lander: no stream can pick it; those sending to it keep it until changed."""
    from models.admin.landers import archive_lander

    archived = archive_lander(ctx.db, ref)
    click.echo(f"Lander {archived.id} ({archived.name}) archived.")


@lander.command("delete")
@click.argument("ref")
@pass_context
def lander_delete(ctx: Context, ref: str) -> None:
    """Delete a lander and its files; refused while a stream sends to it."""
    from models.admin.landers import delete_lander

    deleted = delete_lander(ctx.db, ref, files=lander_files(ctx))
    click.echo(f"Lander {deleted.id} ({deleted.name}) deleted.")
