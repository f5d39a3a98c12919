"""`lanner simulate` and `lanner click`: how a click would be routed, and the stored ones."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option, log_filter_options
from cli.output import echo_rows, json_text


def echo_trace(data: dict[str, Any]) -> None:
    """A routing trace (models/routing/trace.py) as readable lines."""
    for entry in data["streams"]:
        label = f"stream {entry['stream']}" + (f" {entry['name']!r}" if entry["name"] else "")
        click.echo(f"  {entry['campaign']} {label} ({entry['type']}): {entry['verdict']}")
        for verdict in entry["filters"]:
            if verdict["passed"] is None:  # A stored click's filter whose input was not stored.
                click.echo(f"      ?     {verdict['filter']}  ({verdict['saw']})")
                continue
            mark = "pass" if verdict["passed"] else "FAIL"
            click.echo(f"      {mark}  {verdict['filter']}  (saw {verdict['saw'] or 'nothing'})")


@click.command("simulate")
@click.argument("url")
@click.option("--ip", default="203.0.113.10", show_default=True, help="The visitor's IP address.")
@click.option("--ua", "user_agent", default="", help="The visitor's User-Agent.")
@click.option("--referrer", default="", help="The Referer header.")
@click.option("--language", default="", help="The Accept-Language header.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    help="Any other header, 'Name: value' (Sec-CH-UA, From, X-Original-User-Agent...); repeatable.",
)
@click.option(
    "--method",
    type=click.Choice(["GET", "HEAD"], case_sensitive=False),
    default="GET",
    show_default=True,
    help="The request's method: HEAD is a bot's (a link checker's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def simulate_command(ctx: Context, url: str, headers: tuple[str, ...], as_json: bool, **visitor: str) -> None:
    """Show how a click on URL (a campaign URL, /alias?params) would be routed; stores nothing."""
    from app import build_tracker
    from routes.simulation import simulate_url

    tracker = build_tracker(ctx.db, ctx.settings)  # ctx.db refuses an unmigrated database.
    try:
        data = simulate_url(
            tracker,
            url,
            headers=headers,
            sub_id_aliases=ctx.settings.sub_id_aliases,
            max_click_cost=ctx.settings.max_click_cost,
            **visitor,
        )
    except ValueError as exc:  # The URL, the IP or a header (LannerGroup says NoActiveCampaign's sentence).
        raise click.ClickException(str(exc)) from None
    finally:
        tracker.close()
    if as_json:
        click.echo(json_text(data))
        return
    click.echo("visitor: " + ", ".join(f"{key}={value}" for key, value in data["visitor"].items()))
    click.echo("streams:")
    echo_trace(data)
    decision = data["decision"]
    click.echo(
        f"decision: stream {decision['stream_id']}, offer {decision['offer_id']}, "
        f"answer {decision['answer']}, route {decision['route']!r}"
    )
    if decision["lander_id"] is not None:
        click.echo(
            f"lander: {decision['lander_name']} ({decision['lander_kind']}, id {decision['lander_id']}); "
            "the offer is chosen when the visitor clicks through to it (the LP click)"
        )
    click.echo(f"location: {decision['location']}")


@click.group("click")
def click_group() -> None:
    """Stored clicks."""


@click_group.command("list")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--stream", "stream_id", type=int)
@click.option("--offer", "offer_id", type=int)
@click.option("--country", help="ISO code, or `unknown`.")
@click.option("--bots/--humans", "is_bot", default=None, help="Only bots / only humans (default: both).")
@log_filter_options
@format_option
@pass_context
def click_list(ctx: Context, campaign_ref: str | None, fmt: str, **options: Any) -> None:
    """The newest stored clicks, newest first, with filters."""
    from models.admin.services import get_campaign
    from models.reporting.clicklog import SHOWN_COLUMNS, ClickFilter, list_clicks
    from models.reporting.historyclicks import click_history

    campaign_id = get_campaign(ctx.db, campaign_ref).id if campaign_ref else None
    rows = list_clicks(ctx.db, ClickFilter(campaign_id=campaign_id, **options), click_history(ctx.settings))
    echo_rows(rows, SHOWN_COLUMNS, fmt)


@click_group.command("show")
@click.argument("subid")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def click_show(ctx: Context, subid: str, as_json: bool) -> None:
    """A stored click with its decision path as it happened, and today's filters re-evaluated on it."""
    from models.reporting.clicklog import stored_click
    from models.reporting.historyclicks import click_history

    settings = ctx.settings
    data = stored_click(
        ctx.db,
        subid,
        geo_path=settings.geo_path,
        geo_network_paths=settings.geo_network_paths,
        history=click_history(settings),
    )
    found = data["click"]
    if as_json:
        click.echo(json_text(data))
        return
    for key, value in found.items():
        if value not in ("", None) or key in ("stream_id", "offer_id"):
            click.echo(f"{key}: {value}")
    click.echo(f"path: {data['path']}")
    if "kept" in data:
        click.echo(f"kept: {data['kept']}")
        return
    click.echo("streams (today's filters re-evaluated on the stored values):")
    echo_trace(data)
