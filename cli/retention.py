"""`lanner prune` and `lanner privacy`: what is kept of visitors' data, and for how long."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.output import progress_to_total


@click.command("prune")
@click.option("--older-than", help="Age of the clicks to delete: 90d, 12w, 2160h. Without it, no clicks go.")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def prune_command(ctx: Context, older_than: str | None, yes: bool) -> None:
    """Delete raw clicks older than an age, in chunks (report totals stay), and the postback log and
    refusal counters older than LANNER_POSTBACK_LOG_DAYS. LANNER_RAW_RETENTION already deletes raw
    clicks older than it once the columnar history holds them; --older-than deletes by age alone,
    held or not (it says how many the history does not hold: those are gone for good)."""
    from models.ops.retention import count_queued, count_unheld, parse_age, prune_clicks, prune_postback_log
    from models.reporting.rawretention import days

    pruned = prune_postback_log(ctx.db, ctx.settings.postback_log_days)
    click.echo(
        f"Deleted {pruned.log_rows:,} postback log rows and {pruned.refusal_rows:,} refusal counters "
        f"older than {ctx.settings.postback_log_days} days."
        if ctx.settings.postback_log_days
        else "The postback log is kept forever (LANNER_POSTBACK_LOG_DAYS=0)."
    )
    retention = ctx.settings.raw_retention
    click.echo(
        f"LANNER_RAW_RETENTION is {days(retention)}: the worker deletes raw clicks older than that once the "
        "click history holds them (`lanner analytics status`)."
        if retention
        else "LANNER_RAW_RETENTION is off: raw clicks stay until `lanner prune --older-than`."
    )
    if older_than is None:
        return
    age_ms = parse_age(older_than)
    unheld = count_unheld(ctx.db, age_ms)
    lost = (
        f" {unheld:,} of them are not in the click history yet: they would be gone for good."
        if unheld
        else " The click history holds them all."
    )
    if not yes:
        click.confirm(
            f"Delete every click older than {older_than} (the click log for that time)?{lost}", abort=True
        )
    with progress_to_total("Pruning") as advance:
        deleted = prune_clicks(
            ctx.db, age_ms, global_uniqueness_hours=ctx.settings.uniqueness_hours, on_progress=advance
        )
    held = (
        f"; {unheld:,} of them were not in the click history" if unheld else ", all held by the click history"
    )
    click.echo(f"Deleted {deleted:,} clicks older than {older_than}{held}.")
    queued = count_queued(ctx.db, age_ms)
    if queued:
        click.echo(
            f"Kept {queued:,} of them changed since the click history copied them (an LP click, a cost, a "
            "sub id): the worker copies them again within a minute, and the next prune deletes them."
        )


@click.group()
def privacy() -> None:
    """Visitors' IP addresses (LANNER_ANONYMIZE_IP)."""


@privacy.command("anonymize-stored")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def privacy_anonymize_stored(ctx: Context, yes: bool) -> None:
    """Truncate the IP address of every stored click as LANNER_ANONYMIZE_IP does new ones (in chunks)."""
    from models.ops.privacy import anonymize_stored_clicks

    if not yes:
        click.confirm(
            "Zero the last octet (IPv4) or the last 80 bits (IPv6) of every stored click's IP address, for "
            "good?",
            abort=True,
        )
    with progress_to_total("Anonymising") as advance:
        changed = anonymize_stored_clicks(ctx.db, on_progress=advance)
    click.echo(f"Anonymised the IP address of {changed:,} clicks.")
