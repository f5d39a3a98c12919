"""The `lanner` command line: thin click commands over the library (parse, call one function, echo).

One module per command group (`cli/offers.py` holds `lanner offer`), the shared state in
`cli/context.py`, the output and the shared options in `cli/output.py` and `cli/options.py`. This module
holds the `main` group and names the others (COMMANDS), each imported when used; the group modules
never import it.

Heavy imports happen inside commands: `lanner serve`'s master must not import the app, so that a
graceful reload (SIGHUP) starts workers on freshly imported code.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

# Each command's name and where it lives, imported only when asked for (click's "lazily loading
# subcommands"): `lanner X` run as a process of its own imports X's module, not the 30 others (~45 ms of
# CPU a call). `lanner --help`, the generated CLI reference and tests/test_cli.py load them all.
COMMANDS: dict[str, tuple[str, str]] = {
    "settings": ("cli.status", "settings_command"),
    "db": ("cli.db", "db"),
    "offer": ("cli.offers", "offer"),
    "source": ("cli.sources", "source"),
    "domain": ("cli.domains", "domain"),
    "network": ("cli.networks", "network"),
    "lander": ("cli.landers", "lander"),
    "campaign": ("cli.campaigns", "campaign"),
    "stream": ("cli.streams", "stream"),
    "serve": ("cli.server", "serve_command"),
    "worker": ("cli.server", "worker_command"),
    "run": ("cli.server", "run_command"),
    "simulate": ("cli.clicks", "simulate_command"),
    "click": ("cli.clicks", "click_group"),
    "conversion": ("cli.conversions", "conversion"),
    "postback": ("cli.postbacks", "postback"),
    "platform": ("cli.platforms", "platform"),
    "api": ("cli.api", "api"),
    "user": ("cli.users", "user"),
    "audit": ("cli.audit", "audit"),
    "report": ("cli.reports", "report_command"),
    "prune": ("cli.retention", "prune_command"),
    "analytics": ("cli.analytics", "analytics"),
    "privacy": ("cli.retention", "privacy"),
    "cost": ("cli.costs", "cost"),
    "label": ("cli.labels", "label"),
    "rule": ("cli.rules", "rule"),
    "alert": ("cli.alerts", "alert"),
    "currency": ("cli.currency", "currency"),
    "bots": ("cli.bots", "bots"),
    "geo": ("cli.geo", "geo"),
    "generate": ("cli.generate", "generate"),
    "status": ("cli.status", "status_command"),
    "backup": ("cli.backup", "backup_command"),
    "restore": ("cli.backup", "restore_command"),
    "nginx": ("cli.nginx", "nginx"),
    "systemd": ("cli.systemd", "systemd"),
    "cluster": ("cli.cluster", "cluster"),
    "spool": ("cli.spool", "spool"),
    "bench": ("cli.bench", "bench"),
}


def load_command(name: str) -> click.Command:
    """The command COMMANDS names `name`, its module imported now."""
    module, attr = COMMANDS[name]
    command = getattr(importlib.import_module(module), attr)
    if not isinstance(command, click.Command) or command.name != name:
        raise RuntimeError(f"cli.COMMANDS[{name!r}] names {module}.{attr}, not the `{name}` command")
    return command


class LannerGroup(click.Group):
    """The `lanner` group: its commands loaded when named (COMMANDS), and any LannerError a command lets
    through is its one sentence and exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name))
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        from models.errors import LannerError

        try:
            return super().invoke(ctx)
        except LannerError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=LannerGroup)
def main() -> None:
    """Lanner: a self-hosted click tracker."""
    # Clicks hold visitors' IPs and user agents, and the spool, queue and backups hold the same: every
    # file a command creates is its owner's only (SQLite gives the WAL the database file's mode).
    os.umask(0o077)
    # Before anything imports peewee: a process on SQLite never loads the PostgreSQL driver.
    from models.store.drivers import hide_postgres_drivers

    hide_postgres_drivers(os.environ.get("LANNER_DATABASE_URL", ""))
