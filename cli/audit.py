"""`lanner audit`: the audit log."""

from __future__ import annotations

import json
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows


@click.group()
def audit() -> None:
    """The audit log: every change to campaigns, streams, offers, users and keys, with who made it."""


@audit.command("list")
@click.option(
    "--entity",
    help="campaign, stream, offer, network, user, api_key, postback_target or status_map; TYPE:ID for one.",
)
@click.option("--actor", help="Only changes by this user (or `cli`, `install key`), any case.")
@click.option("--since", help="YYYY-MM-DD or YYYY-MM-DDTHH:MM in --timezone, inclusive.")
@click.option("--timezone", default="UTC", show_default=True, help="For --since and the times shown.")
@click.option("--limit", type=int, default=50, show_default=True)
@format_option
@pass_context
def audit_list(ctx: Context, fmt: str, **options: Any) -> None:
    """The newest changes, newest first, with the changed fields' old and new values."""
    from models.accounts.audit import AUDIT_COLUMNS, audit_rows

    rows = audit_rows(ctx.db, **options)
    if fmt != "json":
        for row in rows:
            row["old"], row["new"] = (json.dumps(row[key], sort_keys=True) for key in ("old", "new"))
    echo_rows(rows, AUDIT_COLUMNS, fmt)
