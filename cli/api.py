"""`lanner api`: the API keys (users' keys and the install key)."""

from __future__ import annotations

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, ms_iso
from models import choices


@click.group()
def api() -> None:
    """The APIs (`GET /api/report`, `/api/v1/...`) and their keys."""


@api.group("key")
def api_key() -> None:
    """API keys (X-Api-Key or Authorization: Bearer): users' keys, and the install key (an admin's)."""


@api_key.command("show")
@pass_context
def api_key_show(ctx: Context) -> None:
    """Print the install key (admin, write scope)."""
    from models.conversions.postbacks import read_secret

    click.echo(read_secret(ctx.db, "api_key"))


@api_key.command("rotate")
@click.confirmation_option(prompt="Clients using the old key will be refused. Rotate?")
@pass_context
def api_key_rotate(ctx: Context) -> None:
    """Replace the install key."""
    from models.conversions.postbacks import rotate_secret

    click.echo(rotate_secret(ctx.db, "api_key"))


@api_key.command("create")
@click.option("--user", "user_name", required=True, help="The key's owner: it has that user's rights.")
@click.option("--scope", type=click.Choice(choices.API_KEY_SCOPES), required=True)
@click.option("--label", default="", help="What the key is for, e.g. the script using it.")
@pass_context
def api_key_create(ctx: Context, user_name: str, scope: str, label: str) -> None:
    """Create a key for a user; prints it, once: only its hash is kept."""
    from models.accounts.apikeys import create_api_key

    created, key = create_api_key(ctx.db, user_name, scope, label=label)
    click.echo(key)
    click.echo(f"API key {created.id} ({scope}) for {created.user}: shown once, store it now.", err=True)


@api_key.command("list")
@format_option
@pass_context
def api_key_list(ctx: Context, fmt: str) -> None:
    """List users' keys (by prefix; the keys themselves are not stored)."""
    from models.accounts.apikeys import list_api_keys

    rows = [
        {
            "id": key.id,
            "user": key.user,
            "scope": key.scope,
            "label": key.label,
            "prefix": key.prefix,
            "created_at": ms_iso(key.created_at),
            "last_used_at": ms_iso(key.last_used_at),
            "revoked": key.is_revoked,
        }
        for key in list_api_keys(ctx.db)
    ]
    echo_rows(rows, ["id", "user", "scope", "label", "prefix", "created_at", "last_used_at", "revoked"], fmt)


@api_key.command("revoke")
@click.argument("key_id", type=int)
@pass_context
def api_key_revoke(ctx: Context, key_id: int) -> None:
    """Revoke a key (by its id in `api key list`): refused from now on."""
    from models.accounts.apikeys import revoke_api_key

    revoke_api_key(ctx.db, key_id)
    click.echo(f"API key {key_id} revoked.")
