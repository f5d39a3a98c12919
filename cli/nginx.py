"""`lanner nginx`: the front's configuration."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from cli.context import Context, pass_context


@click.group()
def nginx() -> None:
    """nginx configuration for the front (templates in nginx/)."""


def _write_or_echo(text: str, output: str | None) -> None:
    if output:
        from workers.ops.certs import write_site

        write_site(output, text)  # Whole, mode 0644: a config for nginx, no secret in it.
    else:
        click.echo(text, nl=False)


@nginx.command("site")
@click.option("--listen", default="80", show_default=True, help="PORT or ADDRESS:PORT nginx listens on.")
@click.option("--server-name", default="_", show_default=True)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    help="Lanner's bind (default LANNER_BIND): HOST:PORT or unix:/PATH. Repeat, one a node, in cluster mode.",
)
@click.option(
    "--admin-upstream",
    "admin_upstreams",
    multiple=True,
    help="The report API worker's bind (default: LANNER_ADMIN_BIND as derived from --upstream; over "
    "several nodes, the nodes' --upstream); repeat, one a node.",
)
@click.option(
    "--report-upstream",
    default="",
    help="Cluster mode: the admin worker of the node that keeps the columnar history "
    "(LANNER_HISTORY_NODE), which the panel and reports go to; the other --admin-upstream stand by.",
)
@click.option(
    "--trusted-proxy", "trusted_proxies", multiple=True, help="CIDR of a CDN/proxy in front; repeat."
)
@click.option(
    "--real-ip-header", default="X-Forwarded-For", show_default=True, help="Header those proxies set."
)
@click.option("--admin-allow", multiple=True, default=("127.0.0.1", "::1"), show_default=True)
@click.option(
    "--https-listen", default="443", show_default=True, help="PORT or ADDRESS:PORT of the domains' HTTPS."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write here instead of stdout (and save the options for --saved: `lanner domain` has the site "
    "rendered again).",
)
@click.option("--save", "is_save", is_flag=True, help="Save the options for --saved (as -o does).")
@click.option(
    "--saved",
    "is_saved",
    is_flag=True,
    help="Render with the options `-o` saved last (DATA_DIR/nginx-site.json), checked again, instead of "
    "the ones given: how root's reload service renders the site.",
)
@pass_context
def nginx_site(
    ctx: Context,
    output: str | None,
    is_save: bool,
    is_saved: bool,
    upstreams: tuple[str, ...],
    admin_upstreams: tuple[str, ...],
    **options: Any,
) -> None:
    """Render the server blocks that proxy campaign URLs, postbacks and the API to Lanner (one box, or
    several nodes: one --upstream and --admin-upstream each), with HTTPS for each domain that has a
    certificate (`lanner domain`; read from the database once it is migrated)."""
    from workers.ops.certs import current_site_domains, record_site, saved_site_options, site_settings
    from workers.ops.nginx import SiteOptions, render_site

    if is_saved:  # The file is the `lanner` user's: checked whole before anything is written.
        site = saved_site_options(ctx.settings)
        domains = current_site_domains(ctx.settings)
        _write_or_echo(render_site(dataclasses.replace(site, domains=domains)), output)
        return
    if len(upstreams) > 1:  # Cluster mode: the nodes' own settings are not this host's.
        admin: str | tuple[str, ...] = admin_upstreams
    else:
        served = ctx.settings.replace(bind=upstreams[0] if upstreams else ctx.settings.bind)
        upstreams = (served.bind,)
        admin = admin_upstreams or served.admin_address
    site = SiteOptions(
        upstream=upstreams,
        admin_upstream=admin,
        **site_settings(ctx.settings),
        **options,
    )
    text = render_site(dataclasses.replace(site, domains=current_site_domains(ctx.settings)))
    _write_or_echo(text, output)
    if output or is_save:
        record_site(ctx.settings, site)


@nginx.command("main")
@click.option("--sites", required=True, help="Absolute path (or glob) of the site file(s) to include.")
@click.option("--pid", "pid_path", default="/run/nginx.pid", show_default=True)
@click.option("--error-log", default="/var/log/nginx/error.log", show_default=True)
@click.option("--temp-dir", default="/var/lib/nginx", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def nginx_main(output: str | None, **paths: str) -> None:
    """Render a main nginx.conf sized for a tracker (worker connections, backlog)."""
    from workers.ops.nginx import render_main

    text = render_main(**paths)
    _write_or_echo(text, output)
