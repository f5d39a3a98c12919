"""`lanner currency`: the report currency and the exchange rates."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows


@click.group()
def currency() -> None:
    """The report currency and the exchange rates amounts are converted into it with."""


@currency.command("relabel")
@click.argument("code")
@click.confirmation_option(prompt="Say every amount stored in the report currency was in this currency?")
@pass_context
def currency_relabel(ctx: Context, code: str) -> None:
    """Say the stored amounts were in CODE all along (an install that never meant USD); no conversion."""
    from models.reporting.currency import relabel_report_currency

    changed = relabel_report_currency(ctx.db, code)
    click.echo(f"Report currency: {code.upper()}; {changed:,} conversion(s) relabelled or converted.")
    if ctx.settings.report_currency != code.upper():
        click.echo(f"Set LANNER_REPORT_CURRENCY={code.upper()} too, or reports will refuse.", err=True)


@currency.group("rate")
def currency_rate() -> None:
    """Exchange rates: what one unit of a currency is worth in the report currency."""


@currency_rate.command("set")
@click.argument("code")
@click.argument("rate")
@click.option("--day", help="The UTC day (YYYY-MM-DD) it applies from; default today. No fetch replaces it.")
@pass_context
def currency_rate_set(ctx: Context, code: str, rate: str, day: str | None) -> None:
    """Set CODE's rate by hand (e.g. `EUR 1.08`: 1 EUR = 1.08 in the report currency) for a day and the
    days after it up to the next stored rate."""
    from models.reporting.currency import parse_day, report_currency, set_rates

    (change,) = set_rates(ctx.db, {code: rate}, day=parse_day(day) if day else None)
    click.echo(change.summary(report_currency(ctx.db.connection())))


@currency_rate.command("list")
@click.option("--history", is_flag=True, help="Every rate stored, not only the latest per currency.")
@format_option
@pass_context
def currency_rate_list(ctx: Context, history: bool, fmt: str) -> None:
    """List the exchange rates (the latest per currency) with the UTC day each applies from."""
    from models.reporting.currency import list_rates, report_currency

    rows = list_rates(ctx.db, history=history)
    if fmt == "table":
        click.echo(f"Report currency: {report_currency(ctx.db.connection())}")
    echo_rows(rows, ["currency", "rate", "report_currency", "day", "source", "is_manual"], fmt)


@currency_rate.command("fetch")
@click.option("--url", help="Read this feed instead of LANNER_EXCHANGE_RATE_URL (the ECB's XML or JSON).")
@pass_context
def currency_rate_fetch(ctx: Context, url: str | None) -> None:
    """Read the rate feed now and store each day's rates that are new or changed (`lanner worker` does
    it daily); rates set by hand stay."""
    from models.reporting.currency import refresh_rates

    url = url or ctx.settings.exchange_rate_url
    if not url:
        raise click.ClickException("LANNER_EXCHANGE_RATE_URL is empty; give the feed with --url.")
    click.echo(refresh_rates(ctx.db, url).summary())


def echo_rate_warnings(ctx: Context, *currencies: str | None) -> None:
    """A warning on stderr for each currency just set that has no exchange rate (it is accepted)."""
    from models.admin.services import rate_warnings

    for warning in rate_warnings(ctx.db, *currencies):
        click.echo(f"Warning: {warning}", err=True)
