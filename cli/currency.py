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
@pass_context
def currency_rate_set(ctx: Context, code: str, rate: str) -> None:
    """Set CODE's rate from now on (e.g. `EUR 1.08`: 1 EUR = 1.08 in the report currency)."""
    from models.reporting.currency import report_currency, set_rates

    (change,) = set_rates(ctx.db, {code: rate})
    report = report_currency(ctx.db.connection())
    click.echo(f"1 {change.currency} = {change.rate:g} {report}.")
    if change.converted:
        click.echo(
            f"Converted {change.converted:,} conversion(s) that were waiting for a {change.currency} rate."
        )


@currency_rate.command("list")
@click.option("--history", is_flag=True, help="Every rate stored, not only the latest per currency.")
@format_option
@pass_context
def currency_rate_list(ctx: Context, history: bool, fmt: str) -> None:
    """List the exchange rates (the latest per currency)."""
    from models.reporting.currency import list_rates, report_currency
    from models.reporting.timerange import local_iso, zone

    rows = list_rates(ctx.db, history=history)
    if fmt == "table":
        click.echo(f"Report currency: {report_currency(ctx.db.connection())}")
        rows = [{**row, "valid_from": local_iso(row["valid_from"], zone("UTC"))} for row in rows]
    echo_rows(rows, ["currency", "rate", "report_currency", "valid_from", "source"], fmt)


@currency_rate.command("refresh")
@pass_context
def currency_rate_refresh(ctx: Context) -> None:
    """Read LANNER_EXCHANGE_RATE_URL now and store the rates that changed (the worker does it hourly)."""
    from models.reporting.currency import refresh_rates

    if not ctx.settings.exchange_rate_url:
        raise click.ClickException("LANNER_EXCHANGE_RATE_URL is not set.")
    changes = refresh_rates(ctx.db, ctx.settings.exchange_rate_url)
    converted = sum(change.converted for change in changes)
    click.echo(f"{len(changes)} rate(s) changed; {converted:,} waiting conversion(s) converted.")
