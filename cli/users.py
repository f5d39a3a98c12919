"""`lanner user`: users of the panel and the API, their passwords and shared campaigns."""

from __future__ import annotations

import sys
from typing import Any

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, ms_iso
from models import choices


def read_new_password(password_stdin: bool) -> str:
    """A new password: the first line of stdin, or asked twice at the terminal without echo."""
    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


password_stdin_option = click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin (for scripts)."
)


@click.group()
def user() -> None:
    """Users of the panel and the API: admin (everything), buyer (own and shared campaigns), viewer (read)."""


@user.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(choices.ROLES), required=True)
@click.option("--hide-money", is_flag=True, help="Hide cost, revenue, profit and ROI from this user.")
@click.option("--timezone", default="", help="IANA name their periods and times are in (default: UTC).")
@password_stdin_option
@pass_context
def user_add(
    ctx: Context, name: str, role: str, hide_money: bool, timezone: str, password_stdin: bool
) -> None:
    """Add a user; asks for the password (at least 10 characters)."""
    from models.accounts.users import add_user, check_name, check_timezone

    check_name(name)  # Before asking for a password the name or timezone would then refuse.
    check_timezone(timezone)
    password = read_new_password(password_stdin)
    added = add_user(ctx.db, name, role, password, hides_money=hide_money, timezone=timezone)
    click.echo(f"User {added.name} ({added.role}) added.")


def panel_line(settings) -> str:
    """Where the web panel is: the admin worker's TCP address, else how to reach its unix socket."""
    address = settings.admin_address or settings.bind
    if address.startswith("unix:"):
        return (
            f"Web panel: /panel/ on the admin socket {address[5:]} (nginx routes it: `lanner nginx site`), "
            "or run with LANNER_ADMIN_BIND=127.0.0.1:8081 and open http://127.0.0.1:8081/panel"
        )
    return f"Web panel: http://{address}/panel"


def first_admin_line(name: str, password: str) -> str:
    return f"First admin: {name}, password: {password} (shown once; `lanner user passwd {name}` changes it)"


@user.command("first-admin")
@pass_context
def user_first_admin(ctx: Context) -> None:
    """Create the admin `admin` with a random password, printed once, if there is no user at all."""
    from models.accounts.users import ensure_first_admin

    first_admin = ensure_first_admin(ctx.db)
    if first_admin:
        click.echo(first_admin_line(*first_admin))


@user.command("list")
@format_option
@pass_context
def user_list(ctx: Context, fmt: str) -> None:
    """List users."""
    from models.accounts.users import list_users

    rows = [
        {
            "id": found.id,
            "name": found.name,
            "role": found.role,
            "hide_money": found.hides_money,
            "disabled": found.is_disabled,
            "timezone": found.timezone,
            "last_login_at": ms_iso(found.last_login_at),
            "created_at": ms_iso(found.created_at),
            "updated_at": ms_iso(found.updated_at),
        }
        for found in list_users(ctx.db)
    ]
    columns = ["id", "name", "role", "hide_money", "disabled", "timezone", "last_login_at", "created_at"]
    echo_rows(rows, [*columns, "updated_at"], fmt)


@user.command("update")
@click.argument("name")
@click.option("--role", type=click.Choice(choices.ROLES))
@click.option(
    "--hide-money/--show-money",
    "hides_money",
    default=None,
    help="Hide (or show) cost, revenue, profit and ROI.",
)
@click.option(
    "--disable/--enable", "is_disabled", default=None, help="A disabled user cannot log in; their keys stop."
)
@click.option("--timezone", help="IANA name their periods and times are in; '' for the default, UTC.")
@pass_context
def user_update(ctx: Context, name: str, **changes: Any) -> None:
    """Change a user's role, money columns, disabled flag or timezone."""
    from models.accounts.users import update_user

    updated = update_user(ctx.db, name, **changes)
    state = "disabled" if updated.is_disabled else "enabled"
    click.echo(f"User {updated.name} updated: {updated.role}, {state}.")


@user.command("passwd")
@click.argument("name")
@password_stdin_option
@pass_context
def user_passwd(ctx: Context, name: str, password_stdin: bool) -> None:
    """Set a user's password."""
    from models.accounts.users import get_user, set_password

    get_user(ctx.db, name)  # Before asking for a password.
    set_password(ctx.db, name, read_new_password(password_stdin))
    click.echo(f"Password of {name} changed.")


@user.command("remove")
@click.argument("name")
@pass_context
def user_remove(ctx: Context, name: str) -> None:
    """Remove a user and their API keys; their campaigns become admins' only."""
    from models.accounts.users import remove_user

    removed = remove_user(ctx.db, name)
    click.echo(f"User {removed.name} removed.")


@user.command("share")
@click.argument("campaign_ref")
@click.argument("name")
@click.option(
    "--edit", "may_edit", is_flag=True, help="They may change it too (buyers only; viewers never write)."
)
@pass_context
def user_share(ctx: Context, campaign_ref: str, name: str, may_edit: bool) -> None:
    """Share a campaign (id or alias) with a user."""
    from models.accounts.sharing import share_campaign

    share_campaign(ctx.db, campaign_ref, name, may_edit=may_edit)
    click.echo(f"Campaign {campaign_ref} shared with {name}" + (", who may edit it." if may_edit else "."))


@user.command("unshare")
@click.argument("campaign_ref")
@click.argument("name")
@pass_context
def user_unshare(ctx: Context, campaign_ref: str, name: str) -> None:
    """Stop sharing a campaign with a user."""
    from models.accounts.sharing import unshare_campaign

    unshare_campaign(ctx.db, campaign_ref, name)
    click.echo(f"Campaign {campaign_ref} no longer shared with {name}.")
