"""`lanner domain`: the host names campaigns are served on, and their certificates."""

from __future__ import annotations

from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text
from models import choices

DOMAIN_COLUMNS = [
    "id",
    "name",
    "status",
    "root_campaign",
    "https",
    "redirect_http",
    "cert_state",
    "cert_expires",
    "url",
]


@click.group()
def domain() -> None:
    """Domains: the host names campaigns are served on, a campaign parked at a root, HTTPS by certbot."""


def _secure(ctx: Context, ref: str | int) -> None:
    """Get the domain's certificate and serve it (workers/ops/certs.py); certbot's failure is the exit."""
    from models.admin.domains import domain_fields
    from workers.ops.certs import CertError, secure_domain

    try:
        secured = secure_domain(ctx.db, ctx.settings, ref)
    except CertError as exc:
        raise click.ClickException(str(exc)) from None
    fields = domain_fields(secured)
    if fields["cert_state"] == "valid":
        click.echo(
            f"Certificate for {secured.name} valid until {fields['cert_expires']} UTC: {fields['url']}"
        )


@domain.command("add")
@click.argument("name")
@click.option("--campaign", help="Park this campaign (alias or id) at the domain's root: `GET /` runs it.")
@click.option("--https/--no-https", "is_https", default=True, show_default=True, help="Get a certificate.")
@click.option("--redirect-http", is_flag=True, help="Plain HTTP answers 301 to HTTPS.")
@click.option(
    "--no-cert", is_flag=True, help="Not now (nginx is not running yet): `lanner domain cert` later."
)
@pass_context
def domain_add(
    ctx: Context, name: str, campaign: str | None, is_https: bool, redirect_http: bool, no_cert: bool
) -> None:
    """Add a domain, get its certificate (certbot, webroot mode through this host's nginx) and serve it."""
    from models.admin.domains import create_domain

    created = create_domain(ctx.db, name, campaign=campaign, is_https=is_https, redirect_http=redirect_http)
    click.echo(f"Domain {created.name} added (id {created.id}).")
    if not no_cert:
        _secure(ctx, created.id)


@domain.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Archived domains too.")
@format_option
@pass_context
def domain_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List domains with their certificate's state and expiry."""
    from models.admin.domains import campaign_aliases, domain_fields, list_domains

    aliases = campaign_aliases(ctx.db)
    rows = [domain_fields(d, aliases) for d in list_domains(ctx.db, include_archived=include_archived)]
    echo_rows(rows, DOMAIN_COLUMNS, fmt)


@domain.command("show")
@click.argument("ref")
@format_option
@pass_context
def domain_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a domain (by name or id)."""
    from models.admin.domains import domain_fields, get_domain

    fields = domain_fields(get_domain(ctx.db, ref))
    if fmt == "json":
        click.echo(json_text(fields))
    elif fmt == "csv":
        echo_rows([fields], [*DOMAIN_COLUMNS, "cert_error"], fmt)
    else:
        for key, value in fields.items():
            click.echo(f"{key}: {'' if value is None else value}")


@domain.command("update")
@click.argument("ref")
@click.option("--campaign", help="Park this campaign at the root; '' parks none.")
@click.option("--https/--no-https", "is_https", default=None)
@click.option("--redirect-http/--no-redirect-http", "redirect_http", default=None)
@click.option("--status", type=click.Choice(choices.DOMAIN_STATUSES))
@pass_context
def domain_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a domain; the site is rendered again (and a certificate got if HTTPS is newly asked for)."""
    from models.admin.domains import update_domain

    updated = update_domain(ctx.db, ref, **changes)
    click.echo(f"Domain {updated.name} updated.")
    if any(changes[name] is not None for name in ("is_https", "redirect_http", "status")):
        _secure(ctx, updated.id)  # The site changes (a parked campaign is the workers' alone).


@domain.command("remove")
@click.argument("ref")
@pass_context
def domain_remove(ctx: Context, ref: str) -> None:
    """Remove a domain; the site is rendered again without it, and certbot forgets its certificate."""
    from models.admin.domains import remove_domain
    from workers.ops.certs import CertError, delete_certificate, request_site

    removed = remove_domain(ctx.db, ref)
    click.echo(f"Domain {removed.name} removed.")
    try:
        request_site(ctx.settings)
        if delete_certificate(ctx.settings, removed.name):
            click.echo("Its certificate is deleted (no more renewals).")
    except CertError as exc:
        raise click.ClickException(str(exc)) from None


@domain.command("cert")
@click.argument("ref")
@pass_context
def domain_cert(ctx: Context, ref: str) -> None:
    """Get the domain's certificate again (after a failure: DNS not pointed here yet, port 80 closed)."""
    _secure(ctx, ref)


@domain.command("renew")
@click.option("--force", is_flag=True, help="Renew every certificate, due or not.")
@pass_context
def domain_renew(ctx: Context, force: bool) -> None:
    """Renew the certificates due (`lanner worker` does it daily); nginx reloads for a renewed one."""
    from workers.ops.certs import renew_due

    renewed = renew_due(ctx.db, ctx.settings, force=force)
    click.echo(f"Renewed: {', '.join(renewed)}." if renewed else "Nothing renewed.")


@domain.command("campaign")
@click.argument("campaign")
@click.argument("domains", nargs=-1)
@pass_context
def domain_campaign(ctx: Context, campaign: str, domains: tuple[str, ...]) -> None:
    """Serve CAMPAIGN only on these DOMAINS (the first is its URL's); none: on every domain again."""
    from models.admin.domains import set_campaign_domains

    served = set_campaign_domains(ctx.db, campaign, domains)
    where = ", ".join(d.name for d in served) or "every domain"
    click.echo(f"Campaign {campaign} is served on {where}.")
