"""`lanner stream`: where a campaign sends its visitors."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import cap_options, format_option, parse_offers, range_options
from cli.output import echo_rows, json_text
from models import choices
from settings import Settings

STREAM_COLUMNS = [
    "id",
    "position",
    "type",
    "weight",
    "action",
    "status",
    "offers",
    "landers",
    "filters",
    "caps",
    "payload",
]
STREAM_ACTION_CHOICE = click.Choice(choices.STREAM_ACTIONS)


def stream_row(ctx: Context, stream) -> dict[str, Any]:
    from models.admin.landers import stream_lander_rows
    from models.admin.services import describe_filters, stream_offers

    caps = [
        f"{label} {value}"
        for label, value in (("daily", stream.daily_cap), ("total", stream.total_cap))
        if value is not None
    ]
    return {
        "id": stream.id,
        "campaign_id": stream.campaign_id,
        "name": stream.name,
        "position": stream.position,
        "type": stream.type,
        "weight": stream.weight,
        "action": stream.action,
        "status": stream.status,
        "offers": " ".join(f"{offer_id}:{weight}" for offer_id, weight in stream_offers(ctx.db, stream)),
        "landers": " ".join(
            f"{row['name']}:{row['weight']}" for row in stream_lander_rows(ctx.db, stream.id)
        ),
        "offer_rotation": stream.offer_rotation,
        "lander_rotation": stream.lander_rotation,
        "fallback_offer": stream.fallback_offer_id,
        "redirect_type": stream.redirect_type,
        "filters": f" {stream.filter_mode.upper()} ".join(describe_filters(stream)),
        "caps": ", ".join(caps),
        "payload": stream.action_payload,
    }


def stream_options(function):
    """Options shared by `stream add` and `stream update` (None = unchanged)."""
    options = [
        click.option("--url", help="Target URL template for --action redirect."),
        click.option("--html", help="The page for --action html."),
        click.option("--target", help="Campaign alias for --action campaign."),
        click.option(
            "--filter",
            "filters",
            multiple=True,
            help="A filter such as country=US,GB or device!=desktop; repeat for several (see README).",
        ),
        click.option(
            "--filter-mode",
            type=click.Choice(choices.FILTER_MODES),
            help="How filters combine (default and).",
        ),
        click.option(
            "--offer-rotation",
            type=click.Choice(choices.OFFER_ROTATIONS),
            help="unvisited: a returning visitor gets an offer of this stream they have not seen yet; "
            "bandit_cr / bandit_epc: Thompson sampling on conversion rate / earnings per click, refreshed "
            "every minute, 10 % of clicks spread evenly (docs/optimisation-rotation.md).",
        ),
        click.option(
            "--lander-rotation",
            type=click.Choice(choices.LANDER_ROTATIONS),
            help="bandit_cr / bandit_epc: Thompson sampling on the landers' click-through to the offer / "
            "earnings per click, refreshed every minute, 10 % of clicks spread evenly; weight by default.",
        ),
        click.option(
            "--redirect-type",
            type=click.Choice(choices.REDIRECT_TYPES),
            help="A 302 (http), or a page with a meta refresh or a script.",
        ),
        click.option(
            "--fallback-offer", "fallback_offer_id", type=int, help="Offer used once all are capped."
        ),
        cap_options,
        click.option(
            "--lander",
            "landers",
            multiple=True,
            help="NAME or NAME:WEIGHT: a lander the visitor sees before the offer; repeat for rotation.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def stream_landers(ctx: Context, values: Iterable[str], clear: bool = False) -> list[tuple[int, int]] | None:
    """--lander NAME[:WEIGHT] (repeatable) as the services take them: [(lander_id, weight)]; None when
    neither it nor --no-landers is given (unchanged), [] for --no-landers."""
    from models.admin.landers import lander_weights

    if clear and values:
        raise click.UsageError("Give --lander or --no-landers, not both.")
    if clear:
        return []
    if not values:
        return None
    return lander_weights(ctx.db, values)


def stream_payload(url: str | None, html: str | None, target: str | None) -> str | None:
    given = [value for value in (url, html, target) if value is not None]
    if len(given) > 1:
        raise click.UsageError("Give only one of --url, --html and --target.")
    return given[0] if given else None


def echo_geo_filter_warnings(settings: Settings, stream) -> None:
    """Warn (on stderr) about the stream's geo filters the configured geo files cannot answer."""
    from models.admin.services import stream_geo_warnings

    for warning in stream_geo_warnings(stream, settings.geo_path, settings.geo_network_paths):
        click.echo(f"Warning: {warning}", err=True)


@click.group()
def stream() -> None:
    """Streams: where a campaign sends its visitors."""


@stream.command("add")
@click.argument("campaign_ref")
@click.option("--name", default="")
@click.option("--type", "type_", type=click.Choice(choices.STREAM_TYPES), default="regular")
@click.option("--position", type=int, help="Evaluation position (default: last).")
@click.option("--weight", type=int, default=100, show_default=True, help="Weight in weighted rotation.")
@click.option("--action", type=STREAM_ACTION_CHOICE, default="offers", show_default=True)
@click.option("--offer", "offers", multiple=True, help="OFFER_ID or OFFER_ID:WEIGHT; repeat for rotation.")
@stream_options
@pass_context
def stream_add(
    ctx: Context,
    campaign_ref: str,
    type_: str,
    offers: tuple[str, ...],
    url: str | None,
    html: str | None,
    target: str | None,
    **options: Any,
) -> None:
    """Add a stream to a campaign; prints its id."""
    from models.admin.services import add_stream

    payload = stream_payload(url, html, target) or ""
    landers = stream_landers(ctx, options.pop("landers")) or []
    added = add_stream(
        ctx.db,
        campaign_ref,
        type=type_,
        offers=parse_offers(offers),
        landers=landers,
        payload=payload,
        **options,
    )
    click.echo(added.id)
    echo_geo_filter_warnings(ctx.settings, added)


@stream.command("list")
@click.argument("campaign_ref")
@format_option
@pass_context
def stream_list(ctx: Context, campaign_ref: str, fmt: str) -> None:
    """List a campaign's streams in evaluation order (intercepting, regular, fallback; by position)."""
    from models.admin.services import list_streams

    echo_rows([stream_row(ctx, s) for s in list_streams(ctx.db, campaign_ref)], STREAM_COLUMNS, fmt)


@stream.command("show")
@click.argument("stream_id", type=int)
@format_option
@pass_context
def stream_show(ctx: Context, stream_id: int, fmt: str) -> None:
    """Show one stream: its offers and landers with their weights, filters and caps."""
    from models.admin.services import get_stream

    row = stream_row(ctx, get_stream(ctx.db, stream_id))
    if fmt != "table":
        echo_rows([row], list(row), fmt)
        return
    for key, value in row.items():
        click.echo(f"{key}: {'' if value is None else value}")


@stream.command("update")
@click.argument("stream_id", type=int)
@click.option("--name")
@click.option("--type", "type_", type=click.Choice(choices.STREAM_TYPES))
@click.option("--position", type=int)
@click.option("--weight", type=int)
@click.option("--action", type=STREAM_ACTION_CHOICE)
@click.option("--status", type=click.Choice([s for s in choices.STREAM_STATUSES if s != "deleted"]))
@click.option("--offer", "offers", multiple=True, help="Replace the offers: OFFER_ID or OFFER_ID:WEIGHT.")
@stream_options
@click.option("--clear-filters", is_flag=True, help="Remove every filter.")
@click.option(
    "--clear-caps", is_flag=True, help="Remove both caps (with --daily-cap or --total-cap: the other one)."
)
@click.option("--no-landers", "clear_landers", is_flag=True, help="Send straight to the offer: no lander.")
@pass_context
def stream_update(
    ctx: Context,
    stream_id: int,
    type_: str | None,
    offers: tuple[str, ...],
    url: str | None,
    html: str | None,
    target: str | None,
    **changes: Any,
) -> None:
    """Change a stream in place (its id never changes); --filter replaces all filters."""
    from models.admin.services import update_stream

    payload = stream_payload(url, html, target)
    landers = stream_landers(ctx, changes.pop("landers"), changes.pop("clear_landers"))
    updated = update_stream(
        ctx.db,
        stream_id,
        type=type_,
        offers=parse_offers(offers),
        landers=landers,
        payload=payload,
        **changes,
    )
    click.echo(f"Stream {updated.id} updated.")
    if changes.get("filters"):
        echo_geo_filter_warnings(ctx.settings, updated)


@stream.command("remove")
@click.argument("stream_id", type=int)
@pass_context
def stream_remove(ctx: Context, stream_id: int) -> None:
    """Remove a stream (kept as deleted so click history still names it)."""
    from models.admin.services import remove_stream

    remove_stream(ctx.db, stream_id)
    click.echo(f"Stream {stream_id} removed.")


SPLIT_TEST_COLUMNS = [
    "id",
    "name",
    "clicks",
    "conversions",
    "cr",
    "difference",
    "p_value",
    "low",
    "high",
    "is_behind",
]
LANDER_COLUMNS = ["lp_views", "lp_clicks", "lp_ctr"]  # A lander test's, after its cr.
BANDIT_COLUMNS = ["clicks", "conversions", "best_probability", "share"]  # After the arm's id.


@stream.command("split-test")
@click.argument("stream_id", type=int)
@click.option("--landers", is_flag=True, help="Compare the stream's landers instead of its offers.")
@click.option(
    "--metric",
    type=click.Choice(choices.SPLIT_TEST_METRICS),
    help="The rate the verdict judges: cr, or lp_ctr (landers only). Default: an offer's cr, a "
    "lander's lp_ctr.",
)
@range_options()
@format_option
@pass_context
def stream_split_test(
    ctx: Context,
    stream_id: int,
    landers: bool,
    metric: str | None,
    since: str | None,
    until: str | None,
    timezone: str,
    fmt: str,
) -> None:
    """A stream's split test: each arm's clicks, conversions and CR (a lander's also its views, LP clicks
    and LP CTR) against the leader's, and a verdict (winner / no winner yet) on CR, or a lander's on LP
    CTR, that stays valid however often it is read; with a bandit rotation of its offers (or, with
    --landers, of its landers), the shares its clicks go by now (a lander's conversions there are, for
    bandit_cr, its clicks on to the offer)."""
    from models.reporting.bandits import stream_shares
    from models.reporting.history import HistoryFiles
    from models.reporting.splittest import split_test

    arm_kind = "lander" if landers else "offer"
    test = split_test(
        ctx.db,
        stream_id,
        history=HistoryFiles.for_reports(ctx.settings),
        arm_kind=arm_kind,
        metric=metric,
        since=since,
        until=until,
        timezone=timezone,
    )
    bandit = stream_shares(ctx.db, stream_id, arm_kind)
    if fmt == "json":
        click.echo(json_text({**test.as_json(), "bandit": bandit}))
        return
    rows = [dataclasses.asdict(arm) for arm in test.arms]
    columns = SPLIT_TEST_COLUMNS
    if arm_kind == "lander":
        columns = [*columns[:5], *LANDER_COLUMNS, *columns[5:]]
    echo_rows(rows, columns, fmt)
    if fmt != "table":
        return
    click.echo(test.sentence)
    rate = "LP CTR" if test.metric == "lp_ctr" else "CR"
    click.echo(
        f"difference, low, high: the leader's {rate} minus the arm's, in points, with its confidence "
        f"sequence at {1 - test.alpha:.0%} over the whole test; p_value: always valid, compared with "
        f"{test.pair_alpha:g}."
    )
    if bandit:
        click.echo("Bandit shares (refreshed every minute):")
        echo_rows(bandit, [arm_kind, *BANDIT_COLUMNS], fmt)
