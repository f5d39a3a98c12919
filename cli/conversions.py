"""`lanner conversion`: stored conversions, a CSV import and corrections."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option, log_filter_options
from cli.output import echo_log, echo_rows, json_text
from models import choices


@click.group()
def conversion() -> None:
    """Stored conversions."""


@conversion.command("list")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--subid")
@click.option("--status", help="lead, sale, rejected, rebill, trash, or an unmapped word.")
@log_filter_options
@format_option
@pass_context
def conversion_list(ctx: Context, fmt: str, **options: Any) -> None:
    """The newest conversions, newest first."""
    from models.reporting.conversionlog import CONVERSION_COLUMNS, list_conversions

    echo_log(ctx, list_conversions, CONVERSION_COLUMNS, fmt, **options)


@conversion.command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON, as the admin API answers.")
@pass_context
def conversion_import(ctx: Context, file, as_json: bool) -> None:
    """Apply a CSV of conversions (FILE, or - for stdin) as postbacks: a header naming some of subid, tid,
    status, payout, currency, from (subid required), then one conversion a line; each line's verdict."""
    from models.conversions.manual import import_conversions, verdict_counts
    from models.conversions.postbacks import ConversionRecorder
    from models.reporting.historyclicks import click_history

    try:
        text = file.read().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise click.ClickException("The CSV is not UTF-8 text.") from None
    recorder = ConversionRecorder(
        ctx.db, park_ms=ctx.settings.postback_park_ms, history=click_history(ctx.settings)
    )
    rows = import_conversions(recorder, text)
    counts = verdict_counts(rows)
    if as_json:
        click.echo(json_text({"rows": [row.as_dict() for row in rows], "verdicts": counts}))
        return
    shown = [{**row.as_dict(), "conversion_id": row.conversion_id or ""} for row in rows]
    echo_rows(shown, ("line", "subid", "verdict", "detail", "conversion_id"), "table")
    click.echo(", ".join(f"{verdict}: {count:,}" for verdict, count in counts.items()) or "No rows.")


@conversion.command("correct")
@click.argument("conversion_id", type=click.IntRange(min=1))
@click.option("--status", help=f"The new status: {', '.join(choices.CONVERSION_STATUSES)}.")
@click.option("--payout", type=float, help="The new payout.")
@click.option("--currency", help="The payout's currency (default: the one it has).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def conversion_correct(
    ctx: Context,
    conversion_id: int,
    status: str | None,
    payout: float | None,
    currency: str | None,
    as_json: bool,
) -> None:
    """Set one conversion's status and/or payout; its cost, the rollups and its outbound postbacks follow
    (any status may replace any other)."""
    from models.conversions.manual import correct_conversion
    from models.reporting.conversionlog import CONVERSION_COLUMNS

    corrected = correct_conversion(ctx.db, conversion_id, status=status, payout=payout, currency=currency)
    row = {name: getattr(corrected, name) for name in CONVERSION_COLUMNS if name != "created_at"}
    if as_json:
        click.echo(json_text(row))
        return
    click.echo(
        f"conversion {corrected.id}: {corrected.status} (first {corrected.original_status}), "
        f"payout {corrected.payout:g} {corrected.currency}"
    )
