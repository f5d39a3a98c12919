"""`lanner backup` and `lanner restore`: the SQLite file's copies, with the columnar click history."""

from __future__ import annotations

from pathlib import Path

import click

from cli.context import Context, pass_context, refuse_on_postgres


@click.command("backup")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@pass_context
def backup_command(ctx: Context, path: str | None) -> None:
    """Copy the database and the click history while the tracker runs (default:
    DATA_DIR/backups/lanner-<time>.db, the history beside it as <file>.history.duckdb)."""
    import time

    from models.ops.backup import backup_database
    from models.reporting.history import HistoryFiles

    refuse_on_postgres(ctx.settings, "backs up a SQLite file; back up PostgreSQL with pg_dump")

    target = (
        Path(path) if path else ctx.settings.data_dir / "backups" / time.strftime("lanner-%Y%m%d-%H%M%S.db")
    )
    started = time.monotonic()
    history = HistoryFiles(ctx.settings.history_path, ctx.settings.history_memory_limit)
    result = backup_database(ctx.settings.database_path, target, history)
    click.echo(f"Backed up to {target} ({result.size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s).")
    if result.history is not None:
        click.echo(
            f"The click history is beside it: {result.history} "
            f"({result.history_clicks:,} clicks, up to click {result.history_position})."
        )
    else:
        click.echo(result.note)


@click.command("restore")
@click.argument("path", type=click.Path(dir_okay=False, exists=True))
@click.confirmation_option(prompt="Replace the database with this backup?")
@pass_context
def restore_command(ctx: Context, path: str) -> None:
    """Replace the database with a backup, and the click history with the one taken with it (stop
    lanner serve and lanner worker first). Without one, the history here is kept and made consistent
    with the restored database; the output says what was done."""

    from models.ops.backup import restore_database
    from models.reporting.history import HistoryFiles

    refuse_on_postgres(ctx.settings, "restores a SQLite file; restore PostgreSQL with pg_restore")
    history = HistoryFiles(ctx.settings.history_path, ctx.settings.history_memory_limit)
    result = restore_database(Path(path), ctx.settings.database_path, ctx.settings.spool_dir, history)
    click.echo(f"Restored {ctx.settings.database_path} from {path}.")
    if result.spool_moved:
        click.echo(f"The spool that belonged to the replaced database was moved to {result.spool_moved}.")
    for sentence in result.history:
        click.echo(sentence)
