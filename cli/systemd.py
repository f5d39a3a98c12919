"""`lanner systemd`: the units of an install."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click


@click.group()
def systemd() -> None:
    """systemd units for an install (templates in systemd/)."""


@systemd.command("render")
# The venv's default is read when the command runs, so --help (and the reference) show no machine's path.
@click.option(
    "--venv",
    default=lambda: sys.prefix,
    show_default="the venv this lanner runs from",
    help="Virtualenv holding bin/lanner.",
)
@click.option("--env-file", default="/etc/lanner/lanner.env", show_default=True)
@click.option("--data-dir", default="/var/lib/lanner", show_default=True)
@click.option("--user", default="lanner", show_default=True)
@click.option("--group", default="lanner", show_default=True)
@click.option("--bind", default="unix:/run/lanner/web.sock", show_default=True)
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("-o", "--output", "directory", required=True, type=click.Path(file_okay=False))
def systemd_render(directory: str, **options: Any) -> None:
    """Write lanner-web.service, lanner-worker.service and lanner.env into a directory."""

    from workers.ops.systemd import UnitOptions, write_units

    written = write_units(UnitOptions(**options), Path(directory))
    for path in written:
        click.echo(path)
