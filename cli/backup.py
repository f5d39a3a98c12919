"""`lanner backup` and `lanner restore`: the database's copies (a SQLite file, or a pg_dump of PostgreSQL),
with the columnar click history."""

from __future__ import annotations

from pathlib import Path

import click

from cli.context import Context, pass_context


@click.command("backup")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@pass_context
def backup_command(ctx: Context, path: str | None) -> None:
    """Copy the database and the click history while the tracker runs (default:
    DATA_DIR/backups/lanner-<time>.db, or lanner-<time>.pgdump, pg_dump's custom format, on PostgreSQL;
    the history beside it as <file>.history.duckdb). On PostgreSQL run it on the node that keeps the
    history (LANNER_HISTORY_NODE)."""
    import time

    from models.reporting.history import HistoryFiles

    suffix = "pgdump" if ctx.settings.uses_postgres else "db"
    target = (
        Path(path)
        if path
        else ctx.settings.data_dir / "backups" / time.strftime(f"lanner-%Y%m%d-%H%M%S.{suffix}")
    )
    started = time.monotonic()
    if ctx.settings.uses_postgres:
        from models.ops.pgbackup import backup_postgres

        history = HistoryFiles.for_reports(ctx.settings)
        node = ctx.settings.history_node
        elsewhere = (
            ""
            if history is not None
            else f"The click history is node {node}'s: run lanner backup there to back it up too."
            if node
            else "No node keeps a click history (LANNER_HISTORY_NODE is empty)."
        )
        result, facts = backup_postgres(ctx.settings.database_url, target, history, elsewhere)
        click.echo(
            f"Backed up to {target} (pg_dump, {result.size / 1e6:.1f} MB in "
            f"{time.monotonic() - started:.1f} s; clicks up to {facts.max_click_id}, the history trusted up "
            f"to click {facts.position})."
        )
    else:
        from models.ops.backup import backup_database

        history = HistoryFiles(ctx.settings.history_path, ctx.settings.history_memory_limit)
        result = backup_database(ctx.settings.database_path, target, history)
        click.echo(
            f"Backed up to {target} ({result.size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s)."
        )
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
    lanner serve and lanner worker first; on PostgreSQL on every node, and run it on the node that keeps
    the history). Without one, the history here is kept and made consistent with the restored
    database; the output says what was done. On PostgreSQL every node's spool position stays where
    the replaced database had it."""
    from models.reporting.history import HistoryFiles

    if ctx.settings.uses_postgres:
        from models.ops.pgbackup import restore_postgres

        restored = restore_postgres(
            ctx.settings.database_url, Path(path), HistoryFiles.for_reports(ctx.settings)
        )
        click.echo(f"Restored {ctx.settings.database_shown} from {path}.")
        for node in restored.nodes:
            at = f"segment {node.segment} byte {node.byte_offset}"
            dumped = f"segment {node.dumped[0]} byte {node.dumped[1]}" if node.dumped else "not known"
            click.echo(
                f"Node {node.name}: goes on landing its spool from {at}, where the replaced database had "
                f"it (the backup: {dumped}); the clicks it landed after the backup are not in the restored "
                "database."
                if node.kept and node.dumped != (node.segment, node.byte_offset)
                else f"Node {node.name}: lands its spool from {at}."
                if node.kept
                else f"Node {node.name}: lands its spool from {at}, the backup's (the replaced database did "
                "not know it): the lines after it that its spool still holds land again."
            )
        for sentence in restored.history:
            click.echo(sentence)
        return
    from models.ops.backup import restore_database

    history = HistoryFiles(ctx.settings.history_path, ctx.settings.history_memory_limit)
    result = restore_database(Path(path), ctx.settings.database_path, ctx.settings.spool_dir, history)
    click.echo(f"Restored {ctx.settings.database_path} from {path}.")
    if result.spool_moved:
        click.echo(f"The spool that belonged to the replaced database was moved to {result.spool_moved}.")
    for sentence in result.history:
        click.echo(sentence)
