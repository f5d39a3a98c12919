"""`lanner db`: migrations, their deferred steps, and the copy from SQLite to PostgreSQL."""

from __future__ import annotations

import contextlib
import sys

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, progress_to_total


@click.group()
def db() -> None:
    """Database migrations, and the copy from SQLite to PostgreSQL."""


@db.command("migrate")
@click.option(
    "--to",
    "up_to",
    metavar="NAME",
    help="Stop after this migration (e.g. 0004_rollups), as for an upgrade rehearsal.",
)
@pass_context
def db_migrate(ctx: Context, up_to: str | None) -> None:
    """Apply pending migrations (each with its history row, in one transaction)."""
    from models.migrations.runner import migrate, migration_names, pending_migrations
    from models.store.database import open_database

    if up_to is not None and up_to not in migration_names():
        raise click.ClickException(f"No migration is named {up_to!r}; `lanner db status` lists them.")
    from models.reporting.currency import adopt_report_currency

    database = open_database(ctx.settings.database_location, autocheckpoint=True)
    pending = [name for name in pending_migrations(database) if up_to is None or name <= up_to]
    applied: list[str] = []
    if pending:
        with click.progressbar(length=len(pending), label="Migrating") as bar:
            applied = migrate(database, on_applied=lambda name: bar.update(1), up_to=up_to)
    if adopt_report_currency(database, ctx.settings.report_currency):
        click.echo(f"Report currency: {ctx.settings.report_currency}.")
    if not pending:
        click.echo(f"{ctx.settings.database_shown}: up to date.")
        return
    # PostgreSQL's baseline is one step: `--to` inside it applies every migration it stands for.
    click.echo(f"Applied {len(applied)} migration(s): {', '.join(applied)}")


@db.command("status")
@format_option
@pass_context
def db_status(ctx: Context, fmt: str) -> None:
    """List migrations and whether each is applied."""
    from models.migrations.runner import migration_status
    from models.store.database import open_database

    database = open_database(ctx.settings.database_location, autocheckpoint=True)
    rows = [
        {"migration": m.name, "applied_at": m.applied_at or "pending", "deferred": ""}
        for m in migration_status(database)
    ]
    if all(row["applied_at"] != "pending" for row in rows) and rows:
        from models.migrations.deferred import list_steps

        for step in list_steps(database):
            progress = f"{step.percent:.1f}% ({step.done_units:,} of {step.total_units:,})"
            rows.append(
                {"migration": step.name, "applied_at": "deferred", "deferred": f"{step.state} {progress}"}
            )
    echo_rows(rows, ["migration", "applied_at", "deferred"], fmt)


@db.command("copy")
@click.argument("source")
@click.argument("target")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="Rows per transaction (each commits with the copy's progress).",
)
def db_copy(source: str, target: str, batch_size: int) -> None:
    """Copy an install from SQLite (SOURCE: sqlite:///PATH) into PostgreSQL (TARGET: postgresql://…),
    resumably, then verify it by counts and sums per table."""
    from models.store.drivers import allow_postgres_drivers

    allow_postgres_drivers()  # TARGET is PostgreSQL whatever LANNER_DATABASE_URL says.
    from models.ops.db_copy import copy_database

    with contextlib.ExitStack() as stack:
        bar: list = []  # Opened at the first batch: a refusal comes before it, alone on the terminal.

        def advance(done: int, total: int) -> None:
            if not bar:
                bar.append(stack.enter_context(progress_to_total("Copying")))
            bar[0](done, total)

        result = copy_database(source, target, batch_size=batch_size, on_progress=advance)

    def shown(value) -> str:
        return f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)

    rows = []
    for table in dict.fromkeys(check.table for check in result.checks):
        checks = [check for check in result.checks if check.table == table]
        sums = [check.measure for check in checks if check.measure.startswith("sum(")]
        checked = ["count"] + (sums if len(sums) <= 3 else [f"{len(sums)} sums"])
        checked += [check.measure for check in checks if check.measure.startswith("max(")]
        differing = [f"{c.measure} {shown(c.source)} != {shown(c.target)}" for c in checks if not c.is_equal]
        rows.append(
            {
                "table": table,
                "rows": checks[0].source,
                "checked": ", ".join(checked),
                "result": "; ".join(differing) or "equal",
            }
        )
    echo_rows(rows, ["table", "rows", "checked", "result"], "table")
    if result.nul_values:
        click.echo(
            f"{result.nul_values} text value(s) held NUL characters, which PostgreSQL cannot store: removed."
        )
    differences = result.differences
    if differences:
        named = ", ".join(f"{check.table} {check.measure}" for check in differences[:3])
        raise click.ClickException(
            f"The copy differs from the source in {len(differences)} check(s) ({named}): the source changed "
            "since the copy began or was resumed; copy into a new database with the source's writers stopped."
        )
    rate = result.rows / result.seconds if result.seconds else 0.0
    resumed = " (resumed)" if result.was_resumed else ""
    click.echo(
        f"Copied {result.rows:,} rows{resumed} in {result.seconds:.1f} s ({rate:,.0f} rows/s); "
        f"{result.total_rows:,} rows in all, verified."
    )


@db.command("run-deferred")
@pass_context
def db_run_deferred(ctx: Context) -> None:
    """Run the deferred steps of applied migrations now (`lanner worker` runs them by itself)."""
    from models.migrations.deferred import pending_steps, run_deferred

    steps = pending_steps(ctx.db)
    if not steps:
        click.echo("No deferred steps pending.")
        return
    for step in steps:
        with click.progressbar(length=max(step.total_units, 1), label=step.name, file=sys.stderr) as bar:
            seen = [step.done_units]
            bar.update(step.done_units)

            def advance(current, bar=bar, seen=seen) -> None:  # This step's bar and count.
                bar.update(current.done_units - seen[0])
                seen[0] = current.done_units

            run_deferred(ctx.db, on_progress=advance, pause=0)
    click.echo(f"Done: {', '.join(step.name for step in steps)}.")


@db.command("fold-partials")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="How many closed days, back from the newest, to look at for partials.",
)
@click.option(
    "--margin-hours",
    type=click.IntRange(min=0),
    default=12,
    show_default=True,
    help="Hours past a day's end in the last timezone (UTC-12) before it is folded.",
)
@pass_context
def db_fold_partials(ctx: Context, days: int, margin_hours: int) -> None:
    """Sum the nodes' partial rollup and cap-counter rows of closed days into one row per key (`lanner
    worker` does so every six hours); reports read fewer rows after, with the same numbers."""
    import time

    from models.reporting.partials import fold_partials

    with contextlib.ExitStack() as stack:
        bar: list = []  # Opened at the first chunk: nothing to fold prints no bar.

        def advance(done: int, total: int) -> None:
            if not bar:
                bar.append(stack.enter_context(progress_to_total("Folding")))
            bar[0](done, total)

        result = fold_partials(ctx.db, time.time(), margin_hours=margin_hours, days=days, on_chunk=advance)
    if not result.chunks:
        click.echo(f"No partials to fold in the {days} day(s) through {result.through.isoformat()}.")
        return
    click.echo(
        f"Folded {result.rows:,} partial row(s) of {len(result.days)} day(s) into one row per key, "
        f"in {result.chunks} transaction(s), through {result.through.isoformat()}."
    )
