"""`lanner platform`: connections that send conversions to Meta, TikTok and Google Ads (docs/platforms.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text
from models import choices

# Each credential's option; a secret given as `-` is read from standard input, so it stays out of the
# shell's history and the process list.
CREDENTIAL_OPTIONS = (
    ("pixel_id", "Meta: the pixel (dataset) id."),
    ("access_token", "Meta or TikTok: the access token (secret; `-` reads it from standard input)."),
    ("pixel_code", "TikTok: the pixel code."),
    ("customer_id", "Google Ads: the account's customer id (123-456-7890)."),
    ("conversion_action", "Google Ads: the conversion action's id (or resource name)."),
    ("developer_token", "Google Ads: the developer token (secret; `-` reads standard input)."),
    ("oauth_token", "Google Ads: an OAuth access token (secret; `-` reads standard input)."),
    ("login_customer_id", "Google Ads: the manager account's customer id, when reached through one."),
)


def credential_options(function):
    for name, text in reversed(CREDENTIAL_OPTIONS):
        function = click.option("--" + name.replace("_", "-"), name, help=text)(function)
    function = click.option(
        "--event",
        "events",
        multiple=True,
        help="status=EventName, e.g. sale=Purchase (repeat; lead, sale, rebill).",
    )(function)
    return click.option("--test-event-code", help="Meta's or TikTok's test event code ('' to stop testing).")(
        function
    )


def credentials_given(options: dict[str, Any]) -> dict[str, str]:
    given = {}
    for name, _ in CREDENTIAL_OPTIONS:
        value = options.pop(name, None)
        if value is None:
            continue
        given[name] = sys.stdin.readline().strip() if value == "-" else value
    return given


def echo_view(view, fmt: str = "table") -> None:
    data = view.fields()
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key in ("id", "name", "platform", "campaign", "source", "status", "test_event_code"):
        click.echo(f"{key}: {data[key]}")
    for key, value in data["credentials"].items():
        click.echo(f"{key}: {value}")
    click.echo("events: " + ", ".join(f"{status}={name}" for status, name in data["events"].items()))


@click.group()
def platform() -> None:
    """Send conversions to ad platforms' conversion APIs (Meta, TikTok, Google Ads)."""


@platform.command("create")
@click.argument("name")
@click.option("--platform", "kind", type=click.Choice(choices.PLATFORMS), required=True)
@click.option("--campaign", help="The campaign (alias or id) whose conversions it sends.")
@click.option("--source", help="Or the traffic source (name or id): every campaign of it.")
@credential_options
@pass_context
def platform_create(
    ctx: Context, name: str, kind: str, campaign: str | None, source: str | None, **options
) -> None:
    """Create a connection; its credentials are shown back masked."""
    from models.conversions.platforms.connections import create_connection

    credentials = credentials_given(options)
    view = create_connection(
        ctx.db,
        name,
        kind,
        campaign=campaign,
        source=source,
        credentials=credentials,
        events=list(options["events"]) or None,
        test_event_code=options["test_event_code"] or "",
    )
    click.echo(f"Connection {view.id} ({view.name}) created.", err=True)
    echo_view(view)


@platform.command("set")
@click.argument("ref")
@credential_options
@pass_context
def platform_set(ctx: Context, ref: str, **options) -> None:
    """Change a connection's credentials, events or test event code ('' removes an optional one)."""
    from models.conversions.platforms.connections import change_connection

    view = change_connection(
        ctx.db,
        ref,
        credentials=credentials_given(options),
        events=list(options["events"]) or None,
        test_event_code=options["test_event_code"],
    )
    echo_view(view)


@platform.command("list")
@format_option
@pass_context
def platform_list(ctx: Context, fmt: str) -> None:
    """List connections."""
    from models.conversions.platforms.connections import list_connections

    rows = [
        view.fields() | {"events": ",".join(f"{s}={n}" for s, n in view.events.items())}
        for view in list_connections(ctx.db)
    ]
    echo_rows(rows, ["id", "name", "platform", "campaign", "source", "status", "events"], fmt)


@platform.command("show")
@click.argument("ref")
@format_option
@pass_context
def platform_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a connection (by name or id), its secrets masked to their last 4 characters."""
    from models.conversions.platforms.connections import get_connection

    echo_view(get_connection(ctx.db, ref), fmt)


@platform.command("pause")
@click.argument("ref")
@pass_context
def platform_pause(ctx: Context, ref: str) -> None:
    """Stop sending: new conversions queue nothing; queued events wait until `resume`."""
    from models.conversions.platforms.connections import set_connection_status

    view = set_connection_status(ctx.db, ref, "paused")
    click.echo(f"Connection {view.name} paused.")


@platform.command("resume")
@click.argument("ref")
@pass_context
def platform_resume(ctx: Context, ref: str) -> None:
    """Send again; the events it held are sent by `lanner worker` within a minute."""
    from models.conversions.platforms.connections import set_connection_status

    view = set_connection_status(ctx.db, ref, "active")
    click.echo(f"Connection {view.name} resumed.")


@platform.command("remove")
@click.argument("ref")
@pass_context
def platform_remove(ctx: Context, ref: str) -> None:
    """Stop for good: its queued events fail; it stays, as removed, with its event log."""
    from models.conversions.platforms.connections import remove_connection

    view = remove_connection(ctx.db, ref)
    click.echo(f"Connection {view.name} removed.")


@platform.command("test")
@click.argument("ref")
@pass_context
def platform_test(ctx: Context, ref: str) -> None:
    """Send one made-up event now and print the platform's answer (exit 1 if it refused it)."""
    from models.conversions.platforms.connections import test_connection
    from models.conversions.platforms.sending import PlatformConfig

    answer = test_connection(ctx.db, ref, PlatformConfig.from_settings(ctx.settings))
    if not answer.ok:
        raise click.ClickException(f"The platform refused the test event: {answer.text}")
    click.echo(f"The platform accepted the test event: {answer.text}")


@platform.command("log")
@click.argument("ref")
@click.option(
    "--state", type=click.Choice(("pending", "sent", "failed", "expired")), help="Only events in this state."
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@format_option
@pass_context
def platform_log(ctx: Context, ref: str, state: str | None, limit: int, fmt: str) -> None:
    """The connection's events, newest first: state, attempts and the platform's last answer."""
    from models.conversions.platforms.connections import connection_log

    rows = connection_log(ctx.db, ref, state=state, limit=limit)
    columns = ["id", "event_id", "status", "state", "attempts", "response_code", "error", "updated_at"]
    echo_rows(rows, columns, fmt)


# Spend connections' credential options (docs/platforms.md, "Spend from traffic sources").
SPEND_CREDENTIAL_OPTIONS = (
    ("ad_account_id", "Meta: the ad account (act_1234567890)."),
    ("advertiser_id", "TikTok: the advertiser's id."),
    ("access_token", "Meta or TikTok: the access token (secret; `-` reads it from standard input)."),
    ("api_token", "PropellerAds: the API token (secret; `-` reads it from standard input)."),
    ("level", "Meta: ad (default) or adset; TikTok: ad (default) or adgroup: what a row's id is of."),
)


def spend_options(function):
    for name, text in reversed(SPEND_CREDENTIAL_OPTIONS):
        function = click.option("--" + name.replace("_", "-"), name, help=text)(function)
    function = click.option(
        "--parameter",
        help="The click parameter holding the row's ad or zone id (as the traffic source names it, or "
        "sub_id_N); '' pulls spend per campaign.",
    )(function)
    function = click.option(
        "--currency", help="The spend's currency when the platform does not say it (PropellerAds: USD)."
    )(function)
    return click.option("--timezone", help="The ad account's timezone: its days are days there.")(function)


def spend_credentials(options: dict[str, Any]) -> dict[str, str]:
    given = {}
    for name, _ in SPEND_CREDENTIAL_OPTIONS:
        value = options.pop(name, None)
        if value is not None:
            given[name] = sys.stdin.readline().strip() if value == "-" else value
    return given


def echo_spend(view, fmt: str = "table") -> None:
    data = view.fields()
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key in ("id", "name", "platform", "source", "parameter", "currency", "timezone", "status"):
        click.echo(f"{key}: {data[key]}")
    for key, value in data["credentials"].items():
        click.echo(f"{key}: {value}")
    click.echo("mappings: " + (", ".join(f"{k}={v}" for k, v in data["mappings"].items()) or "none"))
    last = data["last_sync"]
    if last:
        click.echo(f"last sync: {last['state']} {last['error'] or last['note'] or ''}".rstrip())
    if data["waits_until"]:
        click.echo(
            f"waits until: {data['waits_until']} (the platform's Retry-After; no periodic sync before)"
        )


@platform.group("spend")
def spend() -> None:
    """Pull daily spend from traffic sources (Meta, PropellerAds, TikTok) into costs."""


@spend.command("create")
@click.argument("name")
@click.option("--platform", "kind", type=click.Choice(choices.SPEND_PLATFORMS), required=True)
@click.option("--source", required=True, help="The traffic source (name or id) whose campaigns it costs.")
@click.option("--map", "mappings", multiple=True, help="PLATFORM_ID=CAMPAIGN: a campaign, ad set or ad id.")
@spend_options
@pass_context
def spend_create(
    ctx: Context, name: str, kind: str, source: str, mappings: tuple[str, ...], **options
) -> None:
    """Create a spend connection; its credentials are shown back masked."""
    from models.reporting.spend.connections import create_spend_connection, map_ids, parse_mappings

    view = create_spend_connection(
        ctx.db,
        name,
        kind,
        source=source,
        credentials=spend_credentials(options),
        parameter=options["parameter"] or "",
        currency=options["currency"] or "",
        timezone=options["timezone"] or "UTC",
    )
    if mappings:
        view = map_ids(ctx.db, view.id, parse_mappings(list(mappings)))
    click.echo(f"Spend connection {view.id} ({view.name}) created.", err=True)
    echo_spend(view)


@spend.command("set")
@click.argument("ref")
@spend_options
@pass_context
def spend_set(ctx: Context, ref: str, **options) -> None:
    """Change a spend connection's credentials, parameter, currency or timezone."""
    from models.reporting.spend.connections import change_spend_connection

    view = change_spend_connection(
        ctx.db,
        ref,
        credentials=spend_credentials(options),
        parameter=options["parameter"],
        currency=options["currency"],
        timezone=options["timezone"],
    )
    echo_spend(view)


@spend.command("map")
@click.argument("ref")
@click.argument("mappings", nargs=-1, required=True)
@pass_context
def spend_map(ctx: Context, ref: str, mappings: tuple[str, ...]) -> None:
    """Map the platform's ids onto campaigns: PLATFORM_ID=CAMPAIGN ... (PLATFORM_ID= removes one)."""
    from models.reporting.spend.connections import map_ids, parse_mappings

    echo_spend(map_ids(ctx.db, ref, parse_mappings(list(mappings))))


@spend.command("list")
@format_option
@pass_context
def spend_list(ctx: Context, fmt: str) -> None:
    """List spend connections and their last sync."""
    from models.reporting.spend.connections import list_spend_connections

    rows = []
    for view in list_spend_connections(ctx.db):
        last = view.last_sync or {}
        rows.append(
            view.fields()
            | {
                "mappings": len(view.mappings),
                "last_sync": last.get("state", ""),
                "error": last.get("error", ""),
            }
        )
    echo_rows(
        rows,
        [
            "id",
            "name",
            "platform",
            "source",
            "parameter",
            "status",
            "mappings",
            "last_sync",
            "error",
            "waits_until",
        ],
        fmt,
    )


@spend.command("show")
@click.argument("ref")
@format_option
@pass_context
def spend_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a spend connection, its secrets masked to their last 4 characters, its mappings and last sync."""
    from models.reporting.spend.connections import get_spend_connection

    echo_spend(get_spend_connection(ctx.db, ref), fmt)


@spend.command("pause")
@click.argument("ref")
@pass_context
def spend_pause(ctx: Context, ref: str) -> None:
    """Stop syncing; the costs it wrote stay."""
    from models.reporting.spend.connections import set_spend_status

    click.echo(f"Spend connection {set_spend_status(ctx.db, ref, 'paused').name} paused.")


@spend.command("resume")
@click.argument("ref")
@pass_context
def spend_resume(ctx: Context, ref: str) -> None:
    """Sync again at the next run of `lanner worker` (or now with `sync`)."""
    from models.reporting.spend.connections import set_spend_status

    click.echo(f"Spend connection {set_spend_status(ctx.db, ref, 'active').name} resumed.")


@spend.command("remove")
@click.argument("ref")
@pass_context
def spend_remove(ctx: Context, ref: str) -> None:
    """Stop for good; the costs it wrote and its log stay."""
    from models.reporting.spend.connections import remove_spend_connection

    click.echo(f"Spend connection {remove_spend_connection(ctx.db, ref).name} removed.")


@spend.command("sync")
@click.argument("ref")
@pass_context
def spend_sync(ctx: Context, ref: str) -> None:
    """Read the window's spend now and write it as costs (exit 1 if the platform failed)."""
    from models.reporting.spend.connections import sync_now
    from models.reporting.spend.sync import SpendConfig

    run = sync_now(ctx.db, ref, SpendConfig.from_settings(ctx.settings))
    if run["state"] != "done":
        raise click.ClickException(f"The sync failed: {run['error']}")
    click.echo(
        f"Synced {run['since']} … {run['until']}: {run['rows']:,} rows, {run['written']:,} costs written, "
        f"{run['unchanged']:,} unchanged, {run['removed']:,} removed, {run['skipped']:,} rows skipped."
    )
    if run["note"]:
        click.echo(run["note"])


@spend.command("log")
@click.argument("ref")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@format_option
@pass_context
def spend_log(ctx: Context, ref: str, limit: int, fmt: str) -> None:
    """The connection's syncs, newest first: rows read, costs written, rows skipped and why, or the error."""
    from models.reporting.spend.connections import sync_log

    columns = ["id", "state", "started_at", "since", "until", "rows", "written", "unchanged", "removed"]
    echo_rows(sync_log(ctx.db, ref, limit=limit), [*columns, "skipped", "note", "error"], fmt)
