"""`lanner spool`: the click journal the worker lands in the database."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows


@click.group()
def spool() -> None:
    """The click journal that the worker lands in the database."""


def spool_dir_option(command):
    """`--data-dir`: another node's data directory (a dead node's disk mounted here), whose spool is
    read or landed into this install's database under the node name its spool was given."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Another node's data directory: its spool, under its own node name (default: LANNER_DATA_DIR).",
    )(command)


def spool_dir_of(settings, data_dir: Path | None) -> Path:
    """The spool a `lanner spool` command reads: this node's, or the one under `data_dir`."""
    if data_dir is None:
        return settings.spool_dir
    spool_dir = data_dir.resolve() / "spool"
    if not spool_dir.is_dir():
        raise click.ClickException(f"{data_dir} holds no spool directory: give a node's LANNER_DATA_DIR.")
    return spool_dir


@spool.command("status")
@spool_dir_option
@format_option
@pass_context
def spool_status_command(ctx: Context, data_dir: Path | None, fmt: str) -> None:
    """How many clicks are spooled and not yet in the database; exits 1 if a segment is lost or damaged.

    Lost: deleted before it landed (missing.log). Damaged: cut short, or ending in a torn line
    (damaged.log). Either is reported until its file is removed to acknowledge it.
    """
    from models.clicks.spool import DAMAGED_FILE, MISSING_FILE, segment_path, spool_status

    spool_dir = spool_dir_of(ctx.settings, data_dir)
    status = spool_status(ctx.db, spool_dir)
    row = {
        "segment": status.position[0],
        "offset": status.position[1],
        "segments": len(status.segments),
        "pending_clicks": status.pending_clicks,
        "pending_bytes": status.pending_bytes,
        "missing_segments": status.missing_segments,
        "damaged_segments": status.damaged_segments,
        "rejected_lines": status.rejected_lines,
    }
    echo_rows([row], list(row), fmt)
    problems = []
    if status.missing_segments:
        segments = ", ".join(map(str, status.missing_segments))
        problems.append(
            f"Spool segment(s) {segments} were deleted before their clicks reached the database; those "
            f"clicks are lost (details in {spool_dir / MISSING_FILE}; remove it to acknowledge)."
        )
    if status.damaged_segments:
        files = ", ".join(str(segment_path(spool_dir, number)) for number in status.damaged_segments)
        problems.append(
            f"Spool segment file(s) {files} are damaged (cut short, or ending in a torn line): the clicks "
            f"they held past the damage that had not reached the database are lost, and no click is "
            f"appended to them any more (details in {spool_dir / DAMAGED_FILE}; remove it to acknowledge)."
        )
    if problems:
        raise click.ClickException(" ".join(problems))  # Exit code 1.


@spool.command("flush")
@click.option("--batch-size", type=int, default=2000, show_default=True)
@spool_dir_option
@pass_context
def spool_flush_command(ctx: Context, batch_size: int, data_dir: Path | None) -> None:
    """Land every spooled click in the database now, as the flusher does (safe while the worker runs)."""
    from models.clicks.landing import SpoolLanding
    from models.clicks.spool import spool_status
    from workers.runtime.tasks import create_huey

    settings = ctx.settings
    spool_dir = spool_dir_of(settings, data_dir)
    pending = spool_status(ctx.db, spool_dir).pending_clicks
    # Outbound postbacks go to this host's queue (settings), never to the other node's files.
    landing = SpoolLanding(
        ctx.db,
        spool_dir,
        settings.spool_segment_bytes,
        bot_ips=settings.bot_ips,
        bot_ranges=settings.bot_ranges_path,
        park_ms=settings.postback_park_ms,
        on_delivery=create_huey(settings).send_postback,  # `lanner worker` sends them.
        # Cluster mode: the node's own visitor file too, as its flusher keeps it.
        visitor_window_ms=int(settings.uniqueness_hours * 3_600_000) if settings.redis_url else None,
    )
    with click.progressbar(length=pending, label="Flushing", file=sys.stderr) as bar:
        seen = [0]

        def advance(result) -> None:
            done = result.inserted + result.duplicates + result.rejected
            bar.update(done - seen[0])
            seen[0] = done

        landed = landing.land_all(batch_size=batch_size, on_batch=advance)
    result = landed.flushed
    click.echo(
        f"Inserted {result.inserted}, already present {result.duplicates}, rejected {result.rejected}."
    )
    if result.lp_clicks:
        click.echo(f"LP clicks {result.lp_clicks} landed on their clicks.")
    if landed.settled:
        click.echo(
            f"Matched {landed.settled} parked postback(s) to their clicks; "
            f"{len(landed.queued)} outbound postback(s) queued for `lanner worker`."
        )
    if not landed.segments_removed:
        click.echo("Landed segments stay until the flusher's next checkpoint (a reader was using the WAL).")
