"""`lanner campaign`: campaigns, the URL a visitor hits."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.currency import echo_rate_warnings
from cli.options import format_option
from cli.output import echo_rows, json_text
from cli.streams import STREAM_COLUMNS, stream_landers, stream_row
from models import choices
from models.admin.views import campaign_fields


def owner_id(ctx: Context, options: dict[str, Any]) -> None:
    """--owner NAME as the services take it: owner_id."""
    from models.accounts.users import get_user

    name = options.pop("owner")
    if name is not None:
        options["owner_id"] = get_user(ctx.db, name).id


def campaign_options(function):
    """Routing options shared by `campaign create` and `campaign update` (None = unchanged)."""
    options = [
        click.option("--timezone", help="IANA timezone for schedules and daily stream caps (default UTC)."),
        click.option(
            "--bind-visitor/--no-bind-visitor",
            default=None,
            help="A returning visitor gets the stream and offer they got before.",
        ),
        click.option(
            "--default-action",
            type=click.Choice(choices.DEFAULT_ACTIONS),
            help="When no stream matches: 404, --default-url, or an empty page (the click is recorded).",
        ),
        click.option("--default-url", "default_payload", help="URL template for --default-action redirect."),
        click.option(
            "--cost-model",
            type=click.Choice(choices.COST_MODELS),
            help="cpc, cpuc (unique clicks), cpm, cpa (leads, sales), cps (sales), revshare (%% of revenue).",
        ),
        click.option(
            "--cost-value", type=float, help="The price per unit of --cost-model (revshare: percent)."
        ),
        click.option(
            "--cost-currency",
            help="Currency of the cost, e.g. EUR (default: the report currency; it needs an exchange rate).",
        ),
        click.option(
            "--owner", help="The user who owns it (a buyer edits their own); default: nobody, admins only."
        ),
        click.option(
            "--source", help="Its traffic source (name or id): its URL's parameters and its postback."
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.group()
def campaign() -> None:
    """Campaigns: the URL a visitor hits, `/<alias>`."""


@campaign.command("create")
@click.argument("name")
@click.option("--alias", required=True, help="The campaign URL path: /<alias>.")
@click.option("--offer-url", help="Create a new offer with this URL template.")
@click.option("--offer-id", type=int, help="Or send to an existing offer.")
@click.option("--rotation", type=click.Choice(choices.ROTATIONS), default="position", show_default=True)
@click.option("--uniqueness-hours", type=float, default=24.0, show_default=True)
@click.option(
    "--lander",
    "landers",
    multiple=True,
    help="NAME or NAME:WEIGHT: its stream's visitors see it first (repeatable).",
)
@campaign_options
@pass_context
def campaign_create(ctx: Context, name: str, alias: str, landers: tuple[str, ...], **options: Any) -> None:
    """Create a campaign with one stream to one offer (behind its landers, if given); prints the campaign
    URL path, with its traffic source's parameters."""
    from models.admin.services import create_campaign

    owner_id(ctx, options)
    created = create_campaign(ctx.db, name, alias, landers=stream_landers(ctx, landers) or (), **options)
    click.echo(campaign_fields(created)["source_url"])
    echo_rate_warnings(ctx, created.cost_currency)


@campaign.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived campaigns.")
@click.option("--tag", help="Only campaigns with this tag (case-blind).")
@format_option
@pass_context
def campaign_list(ctx: Context, include_archived: bool, tag: str | None, fmt: str) -> None:
    """List campaigns, with their tags."""
    from models.admin.services import list_campaigns
    from models.admin.tags import campaign_tags, has_tag, tag_text

    campaigns = list_campaigns(ctx.db, include_archived=include_archived)
    tags = campaign_tags(ctx.db, [c.id for c in campaigns])
    wanted = tag_text(tag)
    rows = [
        campaign_fields(c, tags.get(c.id, []))
        for c in campaigns
        if not wanted or has_tag(tags.get(c.id, []), wanted)
    ]
    if fmt != "json":  # One cell: the tags as the editor takes them.
        rows = [{**row, "tags": ", ".join(row["tags"])} for row in rows]
    columns = ["id", "alias", "name", "status", "rotation", "uniqueness_hours", "source", "tags", "url"]
    echo_rows(rows, columns, fmt)


@campaign.command("show")
@click.argument("ref")
@format_option
@pass_context
def campaign_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a campaign (by id or alias) with its streams."""
    from models.admin.services import get_campaign, list_streams

    found = get_campaign(ctx.db, ref)
    data = campaign_fields(found)
    data["streams"] = [stream_row(ctx, s) for s in list_streams(ctx.db, found.id)]
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key == "tags":
            click.echo(f"tags: {', '.join(value)}")
        elif key != "streams":
            click.echo(f"{key}: {value}")
    click.echo("streams:")
    echo_rows(data["streams"], STREAM_COLUMNS, "table")


@campaign.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--alias")
@click.option("--rotation", type=click.Choice(choices.ROTATIONS))
@click.option("--uniqueness-hours", type=float)
@click.option("--status", type=click.Choice(choices.CAMPAIGN_STATUSES))
@campaign_options
@click.option(
    "--no-owner", "clear_owner", is_flag=True, help="Owned by nobody: admins only (and its shares)."
)
@click.option("--no-source", "clear_source", is_flag=True, help="No traffic source (its postback goes too).")
@click.option(
    "--new-token", is_flag=True, help="A new Click API token (/click_api/v3): the old one stops working."
)
@pass_context
def campaign_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a campaign."""
    from models.admin.services import update_campaign

    owner_id(ctx, changes)
    updated = update_campaign(ctx.db, ref, **changes)
    click.echo(f"Campaign {updated.id} updated: /{updated.alias}")
    if changes.get("cost_currency"):
        echo_rate_warnings(ctx, updated.cost_currency)


@campaign.command("archive")
@click.argument("ref")
@pass_context
def campaign_archive(ctx: Context, ref: str) -> None:
    """Archive a campaign: its URL answers 404 (or the fallback URL) from now on."""
    from models.admin.services import archive_campaign

    archived = archive_campaign(ctx.db, ref)
    click.echo(f"Campaign {archived.id} archived.")


@campaign.command("clone")
@click.argument("ref")
@click.option("--name", help='The copy\'s name (default: "<name> (copy)").')
@click.option("--alias", help="The copy's alias (default: <alias>-copy, numbered until free).")
@pass_context
def campaign_clone(ctx: Context, ref: str, name: str | None, alias: str | None) -> None:
    """Copy a campaign with its streams, filters and offer weights; prints the copy's URL path."""
    from models.admin.services import clone_campaign

    copy = clone_campaign(ctx.db, ref, name=name, alias=alias)
    click.echo(f"/{copy.alias}")


@campaign.group("tag")
def campaign_tag() -> None:
    """A campaign's tags: free names grouping campaigns ("push", "tier 1"), as the panel's list filters by."""


@campaign_tag.command("add")
@click.argument("ref")
@click.argument("tags", nargs=-1, required=True)
@pass_context
def campaign_tag_add(ctx: Context, ref: str, tags: tuple[str, ...]) -> None:
    """Tag a campaign (by id or alias) with TAGS (quote one with spaces); prints its tags."""
    from models.admin.services import get_campaign
    from models.admin.tags import add_campaign_tags

    click.echo(", ".join(add_campaign_tags(ctx.db, get_campaign(ctx.db, ref), tags)))


@campaign_tag.command("remove")
@click.argument("ref")
@click.argument("tags", nargs=-1, required=True)
@pass_context
def campaign_tag_remove(ctx: Context, ref: str, tags: tuple[str, ...]) -> None:
    """Take TAGS off a campaign (case-blind; one it lacks is no error); prints the tags left."""
    from models.admin.services import get_campaign
    from models.admin.tags import remove_campaign_tags

    click.echo(", ".join(remove_campaign_tags(ctx.db, get_campaign(ctx.db, ref), tags)))


@campaign_tag.command("list")
@click.argument("ref", required=False)
@format_option
@pass_context
def campaign_tag_list(ctx: Context, ref: str | None, fmt: str) -> None:
    """Every tag with how many campaigns carry it (archived ones too); with REF, that campaign's tags."""
    from models.admin.services import get_campaign
    from models.admin.tags import campaign_tags, tag_counts

    if ref is not None:
        found = get_campaign(ctx.db, ref)
        mine = [{"tag": tag} for tag in campaign_tags(ctx.db, [found.id]).get(found.id, [])]
        echo_rows(mine, ["tag"], fmt)
        return
    counts = tag_counts(campaign_tags(ctx.db))
    rows: list[dict[str, Any]] = [{"tag": tag, "campaigns": count} for tag, count in counts]
    echo_rows(rows, ["tag", "campaigns"], fmt)
