"""`lanner analytics`: the columnar click history reports read (docs/analytics.md): where it stands,
its check against the row store, its compaction, its sub id cube and its rebuild."""

from __future__ import annotations

import time

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text, progress_to_total

STATUS_COLUMNS = (
    "state",
    "position",
    "row_store_max_id",
    "lag_clicks",
    "lag_seconds",
    "pending_changes",
    "history_clicks",
    "conversion_lag",
    "history_conversions",
    "file_bytes",
    "bytes_per_click",
    "first_click_at",
    "last_click_at",
    "compacted_before",
    "compaction_days_left",
    "cube_days",
    "cube_stale_days",
    "cube_days_left",
    "cube_rows",
    "retention",
    "retention_state",
    "oldest_raw_click_at",
    "history_only_clicks",
)
MISMATCH_COLUMNS = ("hour", "history_clicks", "row_clicks", "history_cost", "row_cost")
CUBE_MISMATCH_COLUMNS = ("day", "cube_clicks", "history_clicks", "cube_cost", "history_cost")
CONVERSION_MISMATCH_COLUMNS = (
    "hour",
    "currency",
    "history_conversions",
    "row_conversions",
    "history_payout",
    "row_payout",
    "history_report_payout",
    "row_report_payout",
)


def _files(ctx: Context):
    from models.reporting.history import HistoryFiles

    return HistoryFiles.of(ctx.settings)


@click.group()
def analytics() -> None:
    """The columnar click history reports read (DATA_DIR/history/clicks.duckdb)."""


@analytics.command("status")
@format_option
@pass_context
def analytics_status(ctx: Context, fmt: str) -> None:
    """The history's position against the row store: lag in clicks and seconds, file size, bytes per
    click, mutated clicks still to copy again; the raw click retention (LANNER_RAW_RETENTION), the oldest
    raw click and how many clicks only the history holds."""
    from functools import partial

    from models.reporting.history import history_count_up_to, history_status
    from models.reporting.rawretention import days, retention_status

    settings = ctx.settings
    files = _files(ctx)
    status = history_status(ctx.db, files)
    retention = retention_status(
        ctx.db,
        settings.raw_retention,
        global_uniqueness_hours=settings.uniqueness_hours,
        keeps_history=settings.keeps_history,
        history_clicks_up_to=partial(history_count_up_to, files),
    )
    plan = retention.plan
    status.update(
        retention=days(plan.retention_ms) if plan.retention_ms else "off",
        retention_state=plan.state,
        retention_note=plan.reason,
        oldest_raw_click_at=_utc(retention.oldest_raw_click),
        history_only_clicks=retention.history_only,
    )
    if fmt == "json":
        click.echo(json_text(status))
        return
    echo_rows([status], STATUS_COLUMNS, fmt)
    if fmt == "table":
        if status["error"]:
            click.echo(status["error"])
        click.echo(plan.reason)


def _utc(ms: int | None) -> str | None:
    import time

    return None if ms is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


@analytics.command("verify")
@click.option("--repair", is_flag=True, help="Copy the mismatched hours again from the row store.")
@pass_context
def analytics_verify(ctx: Context, repair: bool) -> None:
    """Compare clicks and cost per hour, and conversions, payout and report payout per hour and currency,
    history against the row store (up to the history's positions); exit 1 on a mismatch."""
    from models.reporting.history import verify_history

    result = verify_history(ctx.db, _files(ctx), repair=repair)
    if result.mismatches:
        echo_rows(
            [
                {
                    "hour": m.hour_utc,
                    "history_clicks": m.history_clicks,
                    "row_clicks": m.row_clicks,
                    "history_cost": m.history_cost,
                    "row_cost": m.row_cost,
                }
                for m in result.mismatches
            ],
            MISMATCH_COLUMNS,
            "table",
        )
    if result.conversion_mismatches:
        echo_rows(
            [{**vars(m), "hour": m.hour_utc} for m in result.conversion_mismatches],
            CONVERSION_MISMATCH_COLUMNS,
            "table",
        )
    if result.cube_mismatches:
        echo_rows(
            [{**vars(m), "day": m.day_utc} for m in result.cube_mismatches], CUBE_MISMATCH_COLUMNS, "table"
        )
    kept = f"; {result.pruned_hours:,} pruned hours only the history keeps" if result.pruned_hours else ""
    conversions = (
        f"; conversions in {result.conversion_hours:,} hours and currencies up to conversion "
        f"{result.conversion_position}; the sub id cube's {result.cube_days:,} days"
    )
    if not result.mismatches and not result.conversion_mismatches and not result.cube_mismatches:
        click.echo(
            f"The history matches the row store: {result.hours:,} hours up to click {result.position}"
            f"{conversions}{kept}."
        )
        return
    if result.is_consistent:
        click.echo(
            f"Copied {result.repaired:,} hours of clicks and {result.conversions_repaired:,} hours of "
            f"conversions again from the row store, and built {result.cube_repaired:,} days of the sub id "
            f"cube again{kept}."
        )
        return
    raise click.ClickException(
        f"The history differs from the row store in {len(result.mismatches):,} of {result.hours:,} hours of "
        f"clicks and {len(result.conversion_mismatches):,} of {result.conversion_hours:,} hours and "
        f"currencies of conversions, and its sub id cube from its clicks in {len(result.cube_mismatches):,} "
        f"of {result.cube_days:,} days; `lanner analytics verify --repair` copies and builds them again."
    )


@analytics.command("rebuild")
@pass_context
def analytics_rebuild(ctx: Context) -> None:
    """Make the history again from the row store, into a new file put in the old one's place when done."""
    from models.reporting.history import rebuild_history

    with progress_to_total("Copying clicks") as advance:
        result = rebuild_history(
            ctx.db, _files(ctx), on_chunk=lambda copied, reached, watermark: advance(reached, watermark)
        )
    period = f" from {result.first_click_at} to {result.last_click_at}" if result.clicks else ""
    lost = ""
    if result.carried:
        lost = f" Kept {result.carried:,} clicks only the old file held (pruned from the row store)."
    if result.lost:
        lost += (
            f" Up to {result.lost:,} clicks created before {result.pruned_before} were pruned from the row "
            "store and "
            + (
                f"the old file could not be read ({result.carry_error})"
                if result.carry_error
                else "no file held them"
            )
            + ": they could not be rebuilt."
        )
    elif result.pruned_before and not result.carried:
        lost = f" Clicks before {result.pruned_before} were pruned from the row store; no history was lost."
    click.echo(
        f"Rebuilt the history: {result.clicks:,} clicks{period}, up to click {result.position}, and "
        f"{result.conversions:,} conversions.{lost}"
    )


@analytics.command("cube")
@pass_context
def analytics_cube(ctx: Context) -> None:
    """Build the sub id cube of every closed day not built yet (or changed since) now (the worker does it
    a little each minute), so reports by zone, campaign and country read its pre-summed days."""
    from models.reporting.subidcube import build_cube

    with progress_to_total("Building the sub id cube") as advance:
        result = build_cube(_files(ctx), on_day=advance)
    click.echo(f"Built the sub id cube of {result.days:,} days ({result.rows:,} rows).")


@analytics.command("compact")
@click.option(
    "--slice",
    "limit",
    type=click.IntRange(min=1),
    default=None,
    help="Clicks one transaction moves at most (a report waits for it) [default: 125,000].",
)
@pass_context
def analytics_compact(ctx: Context, limit: int | None) -> None:
    """Rewrite every closed day of the history campaign by campaign in time order now (the worker does
    it a little each minute), so a report of one campaign reads only its row groups."""
    from models.reporting.compaction import SLICE, compact_history

    with progress_to_total("Compacting days") as advance:
        result = compact_history(
            _files(ctx), limit=limit or SLICE, on_step=lambda done, total: advance(done, total)
        )
    before = (
        f"; every day before {time.strftime('%Y-%m-%d', time.gmtime(result.compacted_before / 1000))} "
        "is compacted"
        if result.compacted_before
        else ""
    )
    click.echo(f"Compacted {result.days:,} days ({result.moved:,} clicks rewritten){before}.")
