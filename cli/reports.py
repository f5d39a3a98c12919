"""`lanner report`: the grouped, filtered report."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option, range_options
from cli.output import echo_rows, json_text
from models import choices


@click.command("report")
@click.option(
    "--group",
    "-g",
    "groups",
    multiple=True,
    help="day, hour, campaign, stream, offer, network, traffic_source, lander, source, country, device, "
    "os, browser, language, sub_id_N, referrer_domain, or a traffic source's parameter name (zoneid) "
    "(repeatable: nested levels); label, beside one sub id, for its values' whitelist/blacklist label "
    "(filter: label=whitelist,blacklist,none). Default: campaign.",
)
@click.option(
    "--filter", "-f", "filters", multiple=True, help="NAME=V1,V2 on the same names, e.g. country=US,GB."
)
@click.option("--campaign", "campaign_ref", help="Campaign id or alias (as is `-f campaign=`).")
@click.option(
    "--preset",
    type=click.Choice(choices.REPORT_PRESETS),
    help="A date range in --timezone.",
)
@range_options()
@click.option(
    "--raw",
    is_flag=True,
    help="Read the row store's raw clicks only, never the rollups or the columnar history (a check; slower).",
)
@click.option(
    "--series",
    "series_rows",
    multiple=True,
    metavar="ROW",
    help="Instead of the report, this row's clicks, conversions, cost, revenue, profit and ROI by day "
    "(by hour over two days or less), in --timezone (repeatable, up to 20 rows): its value, or for "
    'several --group levels a JSON array of its values in their order (\'["US", "1234"]\').',
)
@format_option
@pass_context
def report_command(
    ctx: Context,
    groups: tuple[str, ...],
    filters: tuple[str, ...],
    campaign_ref: str | None,
    raw: bool,
    series_rows: tuple[str, ...],
    fmt: str,
    **options: Any,
) -> None:
    """Clicks, conversions, revenue, cost, profit and ROI, LP views, LP clicks and LP CTR, grouped and
    filtered (default: last 30 days). Read from the rollups, or the columnar history for what they do
    not keep (sub_id_N, referrer_domain ...); from the row store's clicks if the history cannot answer,
    with a note saying why."""
    from models.reporting.history import HistoryFiles
    from models.reporting.reports import ReportQuery, parse_filters, run_report

    parsed = parse_filters(filters)
    if campaign_ref:
        parsed["campaign"] = (campaign_ref,)  # An id or an alias, resolved as the API does.
    if not (options["preset"] or options["since"] or options["until"]):
        options["preset"] = "last_30_days"
    query = ReportQuery(
        group_by=groups or ("campaign",),
        filters=parsed,
        source="raw" if raw else "auto",
        currency=ctx.settings.report_currency,
        **options,
    )
    history = HistoryFiles.for_reports(ctx.settings)
    if series_rows:
        _echo_series(ctx, query, series_rows, history, fmt)
        return
    report = run_report(ctx.db, query, history=history)
    if fmt == "json":
        click.echo(json_text(report.as_json()))
        return
    rows = report.rows + (
        [{**report.total, report.columns[0]: "total"}] if fmt == "table" and report.rows else []
    )
    columns = report.columns
    if fmt == "table":
        click.echo(f"Amounts in {report.currency}.")
        # The count where a row has conversions (or click costs) waiting for a rate, its sentence below.
        is_uncosted = bool(report.total.get("uncosted"))
        columns = [
            c
            for c in columns
            if c not in ("unconverted_note", "uncosted_note")
            and (c != "unconverted" or report.unconverted)
            and (c != "uncosted" or is_uncosted)
        ]
    echo_rows(rows, columns, fmt)
    if fmt == "table":
        for row in rows:
            label = ", ".join(str(row.get(group)) for group in report.columns[: len(query.group_by)])
            for gap in ("unconverted_note", "uncosted_note"):
                if row.get(gap):
                    click.echo(f"Note: {label}: {row[gap]}")
    for note in report.notes:  # CSV: on stderr, so the file stays CSV.
        click.echo(f"Note: {note}", err=fmt == "csv")


def _echo_series(ctx: Context, query, texts: tuple[str, ...], history, fmt: str) -> None:
    from models.reporting.series import parse_rows, run_series

    series = run_series(ctx.db, query, parse_rows(texts, query.group_by), history=history)
    if fmt == "json":
        click.echo(json_text(series.as_json()))
        return
    if fmt == "table":
        click.echo(f"By {series.time_group} in {series.timezone}; amounts in {series.currency}.")
    echo_rows(series.flat_rows(), series.columns, fmt)
    for note in series.notes:
        click.echo(f"Note: {note}", err=fmt == "csv")
