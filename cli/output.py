"""How commands print: tables, JSON and CSV, progress bars, times."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import sys
from collections.abc import Sequence
from datetime import UTC
from typing import Any

import click

from cli.context import Context


def json_text(data: Any) -> str:
    """Indented JSON with Infinity and NaN (a cost stored before costs were bounded) as null: the
    tokens Python would print for them are not JSON, and break every reader."""

    def finite(value: Any) -> Any:
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, dict):
            return {key: finite(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [finite(item) for item in value]
        return value

    return json.dumps(finite(data), indent=2, default=str, allow_nan=False)


def echo_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str) -> None:
    """Print rows as an aligned table, JSON or CSV."""
    if fmt == "json":
        click.echo(json_text(list(rows)))
        return
    if fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return
    cells = [[str(row.get(column, "")) for column in columns] for row in rows]
    widths = [max([len(column)] + [len(line[i]) for line in cells]) for i, column in enumerate(columns)]
    click.echo("  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)).rstrip())
    for line in cells:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


@contextlib.contextmanager
def progress_to_total(label: str):
    """A progress bar for work that learns its total as it goes: yields on_progress(done, total)."""
    with click.progressbar(length=1, label=label, file=sys.stderr) as bar:

        def advance(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - bar.pos)

        yield advance


def ms_iso(ms: int | None) -> str | None:
    """Unix ms as UTC ISO text to the second (None stays None)."""
    from datetime import datetime

    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def echo_log(
    ctx: Context, list_function, columns, fmt: str, campaign_ref: str | None = None, **options: Any
) -> None:
    from models.admin.services import get_campaign
    from models.reporting.conversionlog import LogFilter

    campaign_id = get_campaign(ctx.db, campaign_ref).id if campaign_ref else None
    extra = {"orphans": options.pop("orphans")} if "orphans" in options else {}
    rows = list_function(ctx.db, LogFilter(campaign_id=campaign_id, **options), **extra)
    echo_rows(rows, columns, fmt)
