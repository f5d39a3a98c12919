"""`lanner postback`: the incoming postbacks' key, log and status words, and the outbound targets."""

from __future__ import annotations

import sys
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option, log_filter_options
from cli.output import echo_log, echo_rows, json_text
from models import choices


@click.group()
def postback() -> None:
    """Incoming postbacks (networks -> Lanner) and outbound ones (Lanner -> traffic sources)."""


@postback.group("key")
def postback_key() -> None:
    """The secret every incoming postback must carry."""


def echo_postback_urls(key: str) -> None:
    click.echo(f"key: {key}")
    click.echo(
        f"postback URL: https://YOUR-DOMAIN/{key}/postback?subid={{subid}}&status={{status}}&payout={{payout}}&tid={{tid}}"
    )
    click.echo(f"conversion pixel: https://YOUR-DOMAIN/px/conversion?key={key}&status=lead")


@postback_key.command("show")
@pass_context
def postback_key_show(ctx: Context) -> None:
    """Print the key and the postback URL to give networks."""
    from models.conversions.postbacks import read_secret

    echo_postback_urls(read_secret(ctx.db, "postback_key"))


@postback_key.command("rotate")
@click.confirmation_option(prompt="Networks using the old key will be refused. Rotate?")
@pass_context
def postback_key_rotate(ctx: Context) -> None:
    """Replace the key; postbacks with the old one are refused at once."""
    from models.conversions.postbacks import rotate_secret

    echo_postback_urls(rotate_secret(ctx.db, "postback_key"))


@postback.command("list")
@click.option("--orphans", is_flag=True, help="Only parked postbacks, still waiting for their click.")
@click.option("--subid")
@click.option("--verdict", "status", type=click.Choice(choices.POSTBACK_VERDICTS))
@log_filter_options
@format_option
@pass_context
def postback_list(ctx: Context, fmt: str, **options: Any) -> None:
    """Incoming postbacks as received, newest first, with what became of each."""
    from models.reporting.conversionlog import POSTBACK_COLUMNS, list_postbacks

    columns = (*POSTBACK_COLUMNS, "expires_at") if options["orphans"] else POSTBACK_COLUMNS
    echo_log(ctx, list_postbacks, columns, fmt, **options)


@postback.command("refusals")
@log_filter_options
@format_option
@pass_context
def postback_refusals(ctx: Context, fmt: str, **options: Any) -> None:
    """Postbacks refused before their key was right (wrong key, unreadable body), per day and address."""
    from models.reporting.conversionlog import REFUSAL_COLUMNS, list_refusals

    echo_log(ctx, list_refusals, REFUSAL_COLUMNS, fmt, **options)


@postback.group("status")
def postback_status() -> None:
    """A network's own status words mapped to lead, sale, rejected, rebill, trash."""


@postback_status.command("map")
@click.argument("word")
@click.argument("status")
@click.option(
    "--network", default="", help="Only for postbacks with this from= (a network's alias); default: all."
)
@pass_context
def postback_status_map(ctx: Context, word: str, status: str, network: str) -> None:
    """Map WORD to STATUS; stored conversions with WORD unmapped take STATUS now."""
    from models.conversions.admin import map_status

    remapped = map_status(ctx.db, word, status, network=network)
    click.echo(f"{word} -> {status}; {remapped} stored conversion(s) re-mapped")


@postback_status.command("unmap")
@click.argument("word")
@click.option("--network", default="")
@pass_context
def postback_status_unmap(ctx: Context, word: str, network: str) -> None:
    """Remove a map (conversions keep the status they have)."""
    from models.conversions.admin import unmap_status

    unmap_status(ctx.db, word, network=network)


@postback_status.command("list")
@format_option
@pass_context
def postback_status_list(ctx: Context, fmt: str) -> None:
    """Custom status maps (the built-in aliases are in the README)."""
    from models.conversions.admin import list_status_maps

    echo_rows(list_status_maps(ctx.db), ["network", "raw_status", "status"], fmt)


@postback.group("target")
def postback_target() -> None:
    """Outbound postbacks: where a campaign's conversions are reported to the traffic source."""


@postback_target.command("add")
@click.argument("campaign_ref")
@click.argument("url")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    required=True,
    help="lead, sale, rejected, rebill, trash (repeatable).",
)
@click.option(
    "--method",
    default="GET",
    show_default=True,
    type=click.Choice(choices.POSTBACK_METHODS, case_sensitive=False),
)
@pass_context
def postback_target_add(
    ctx: Context, campaign_ref: str, url: str, statuses: tuple[str, ...], method: str
) -> None:
    """Send URL (macros: the click's plus {status} {payout} {revenue} {currency} {tid} {conversion_id})."""
    from models.conversions.admin import add_target

    target = add_target(ctx.db, campaign_ref, url, list(statuses), method=method)
    click.echo(target.id)


@postback_target.command("list")
@click.option("--campaign", "campaign_ref")
@format_option
@pass_context
def postback_target_list(ctx: Context, campaign_ref: str | None, fmt: str) -> None:
    """Active outbound postback targets."""
    from models.conversions.admin import list_targets

    echo_rows(list_targets(ctx.db, campaign_ref), ["id", "campaign_id", "statuses", "method", "url"], fmt)


@postback_target.command("remove")
@click.argument("target_id", type=int)
@pass_context
def postback_target_remove(ctx: Context, target_id: int) -> None:
    """Stop sending to a target; its delivery log stays."""
    from models.conversions.admin import remove_target

    remove_target(ctx.db, target_id)


@postback.command("deliveries")
@click.option("--campaign", "campaign_ref")
@click.option("--state", "status", help="pending, sent or failed.")
@log_filter_options
@format_option
@pass_context
def postback_deliveries(ctx: Context, fmt: str, **options: Any) -> None:
    """Outbound postbacks sent, pending a retry, or given up, newest first."""
    from models.reporting.conversionlog import DELIVERY_COLUMNS, list_deliveries

    echo_log(ctx, list_deliveries, DELIVERY_COLUMNS, fmt, **options)


@postback.command("test")
@click.argument("url")
@click.option(
    "--method",
    default="GET",
    show_default=True,
    type=click.Choice(choices.POSTBACK_METHODS, case_sensitive=False),
)
@click.option("--status", default="sale", show_default=True)
@click.option("--payout", type=float, default=1.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def postback_test(url: str, method: str, status: str, payout: float, as_json: bool) -> None:
    """Send one outbound postback to URL now with sample values (stores nothing)."""
    from models.conversions.admin import test_target

    result = test_target(url, method=method, status=status, payout=payout)
    if as_json:
        click.echo(json_text(result))
    else:
        click.echo(f"{result['method']} {result['url']}")
        click.echo(f"answer: {result['response_code'] or '-'} {result['error']}".rstrip())
    if not result["ok"]:
        sys.exit(1)
