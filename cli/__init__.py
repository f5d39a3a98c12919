"""The `lanner` command line: thin click commands over the library (parse, call one function, echo).

One module per command group (`cli/offers.py` holds `lanner offer`), the shared state in
`cli/context.py`, the output and the shared options in `cli/output.py` and `cli/options.py`. This module
holds the `main` group and adds the others to it; the group modules never import it.

Heavy imports happen inside commands: `lanner serve`'s master must not import the app, so that a
graceful reload (SIGHUP) starts workers on freshly imported code.
"""

from __future__ import annotations

import os
from typing import Any

import click

from cli import (
    alerts,
    analytics,
    api,
    audit,
    backup,
    bench,
    bots,
    campaigns,
    clicks,
    cluster,
    conversions,
    costs,
    currency,
    db,
    domains,
    generate,
    geo,
    labels,
    landers,
    networks,
    nginx,
    offers,
    platforms,
    postbacks,
    reports,
    retention,
    rules,
    server,
    sources,
    spool,
    status,
    streams,
    systemd,
    users,
)


class LannerGroup(click.Group):
    """The `lanner` group: any LannerError a command lets through is its one sentence and exit 1."""

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


COMMANDS = (
    status.settings_command,
    db.db,
    offers.offer,
    sources.source,
    domains.domain,
    networks.network,
    landers.lander,
    campaigns.campaign,
    streams.stream,
    server.serve_command,
    server.worker_command,
    server.run_command,
    clicks.simulate_command,
    clicks.click_group,
    conversions.conversion,
    postbacks.postback,
    platforms.platform,
    api.api,
    users.user,
    audit.audit,
    reports.report_command,
    retention.prune_command,
    analytics.analytics,
    retention.privacy,
    costs.cost,
    labels.label,
    rules.rule,
    alerts.alert,
    currency.currency,
    bots.bots,
    geo.geo,
    generate.generate,
    status.status_command,
    backup.backup_command,
    backup.restore_command,
    nginx.nginx,
    systemd.systemd,
    cluster.cluster,
    spool.spool,
    bench.bench,
)
for command in COMMANDS:
    main.add_command(command)
