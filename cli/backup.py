"""`lanner backup` and `lanner restore`: the SQLite file's copies."""

from __future__ import annotations

from pathlib import Path

import click

from cli.context import Context, pass_context, refuse_on_postgres


@click.command("backup")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@pass_context
def backup_command(ctx: Context, path: str | None) -> None:
    """Copy the database while the tracker runs (default: DATA_DIR/backups/lanner-<time>.db)."""
    import time

    from models.ops.backup import backup_database

    refuse_on_postgres(ctx.settings, "backs up a SQLite file; back up PostgreSQL with pg_dump")

    target = (
        Path(path) if path else ctx.settings.data_dir / "backups" / time.strftime("lanner-%Y%m%d-%H%M%S.db")
    )
    started = time.monotonic()
    size = backup_database(ctx.settings.database_path, target)
    click.echo(f"Backed up to {target} ({size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s).")


@click.command("restore")
@click.argument("path", type=click.Path(dir_okay=False, exists=True))
@click.confirmation_option(prompt="Replace the database with this backup?")
@pass_context
def restore_command(ctx: Context, path: str) -> None:
    """Replace the database with a backup (stop lanner serve and lanner worker first)."""

    from models.ops.backup import restore_database

    refuse_on_postgres(ctx.settings, "restores a SQLite file; restore PostgreSQL with pg_restore")
    moved = restore_database(Path(path), ctx.settings.database_path, ctx.settings.spool_dir)
    click.echo(f"Restored {ctx.settings.database_path} from {path}.")
    if moved:
        click.echo(f"The spool that belonged to the replaced database was moved to {moved}.")
