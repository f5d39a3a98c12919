"""`lanner alert`: channels that alerts go to (Telegram, Slack, a signed webhook), their log, and the
operations checks (docs/alerts.md)."""

from __future__ import annotations

import sys

import click

from cli.context import Context, pass_context
from cli.options import format_option
from cli.output import echo_rows, json_text, ms_iso

CHANNEL_COLUMNS = ["id", "name", "kind", "status", "ops", "settings"]
LOG_COLUMNS = ["id", "channel", "kind", "title", "state", "attempts", "response_code", "error", "created_at"]
# A secret given as `-` is read from standard input: out of the shell's history and the process list.
FIELD_OPTIONS = (
    ("bot_token", "Telegram: the bot's token from @BotFather (secret; `-` reads standard input)."),
    ("chat_id", "Telegram: the chat to post in (a number, -100… for a group or channel, or @channel)."),
    ("webhook_url", "Slack: the incoming webhook's URL (secret; `-` reads standard input)."),
    ("url", "Webhook: where to POST the signed JSON."),
    (
        "signing_secret",
        "Webhook: the HMAC-SHA256 key (secret; `-` reads standard input); default: one made, shown once.",
    ),
)


def _echo_channel(view, fmt: str) -> None:
    data = view.fields()
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key in ("id", "name", "kind", "status", "ops"):
        click.echo(f"{key}: {data[key]}")
    for key, value in {**data["options"], **data["secrets"]}.items():
        click.echo(f"{key}: {value}")


@click.group()
def alert() -> None:
    """Alerts to Telegram, Slack or a signed webhook: what rules did, and operations trouble."""


@alert.group("channel")
def channel() -> None:
    """Where alerts go."""


def _field_options(function):
    for name, text in reversed(FIELD_OPTIONS):
        function = click.option("--" + name.replace("_", "-"), name, help=text)(function)
    return function


@channel.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["telegram", "slack", "webhook"]), required=True)
@_field_options
@click.option("--ops", "is_ops", is_flag=True, help="Send it the operations alerts too.")
@format_option
@pass_context
def channel_add(ctx: Context, name: str, kind: str, is_ops: bool, fmt: str, **fields) -> None:
    """Add a channel NAME; its secrets are shown back masked."""
    from models.alerts.channels import create_channel
    from models.alerts.senders import AlertConfig

    given = {key: sys.stdin.readline().strip() if value == "-" else value for key, value in fields.items()}
    view, made = create_channel(
        ctx.db, name, kind, given, is_ops=is_ops, config=AlertConfig.from_settings(ctx.settings)
    )
    _echo_channel(view, fmt)
    if made:
        click.echo(f"signing secret (shown this once): {made}", err=fmt == "json")


@channel.command("list")
@format_option
@pass_context
def channel_list(ctx: Context, fmt: str) -> None:
    """The channels, secrets masked."""
    from models.alerts.channels import list_channels

    views = list_channels(ctx.db)
    if fmt == "json":
        click.echo(json_text([view.fields() for view in views]))
        return
    rows = [
        {
            **view.fields(),
            "settings": " ".join(f"{k}={v}" for k, v in {**view.options, **view.secrets}.items()),
        }
        for view in views
    ]
    echo_rows(rows, CHANNEL_COLUMNS, fmt)


@channel.command("show")
@click.argument("name")
@format_option
@pass_context
def channel_show(ctx: Context, name: str, fmt: str) -> None:
    """One channel, secrets masked."""
    from models.alerts.channels import get_channel

    _echo_channel(get_channel(ctx.db, name), fmt)


@channel.command("test")
@click.argument("name")
@pass_context
def channel_test(ctx: Context, name: str) -> None:
    """Send channel NAME a test message now (it is in its log; a failure is retried by `lanner worker`)."""
    from models.alerts.delivery import queue_test, send_alert
    from models.alerts.senders import AlertConfig

    alert_id = queue_test(ctx.db, name)
    result = send_alert(
        ctx.db,
        alert_id,
        config=AlertConfig.from_settings(ctx.settings),
        retry_base=ctx.settings.alert_retry_seconds,
    )
    if result.state == "sent":
        click.echo(f"The channel accepted test alert {alert_id}.")
    elif result.state == "held":
        raise click.ClickException(f"Channel {name!r} is paused: test alert {alert_id} waits for it.")
    else:
        raise click.ClickException(f"Test alert {alert_id} was not sent: {result.error}")


@channel.command("pause")
@click.argument("name")
@pass_context
def channel_pause(ctx: Context, name: str) -> None:
    """Hold channel NAME's alerts (they queue and wait)."""
    from models.alerts.channels import set_channel_status

    click.echo(f"Channel {set_channel_status(ctx.db, name, 'paused').name} paused.")


@channel.command("resume")
@click.argument("name")
@pass_context
def channel_resume(ctx: Context, name: str) -> None:
    """Send channel NAME's alerts again (what waited goes at once)."""
    from models.alerts.channels import set_channel_status

    click.echo(f"Channel {set_channel_status(ctx.db, name, 'active').name} resumed.")


@channel.command("ops")
@click.argument("name")
@click.option("--on/--off", "is_ops", required=True, help="Whether it gets the operations alerts.")
@pass_context
def channel_ops(ctx: Context, name: str, is_ops: bool) -> None:
    """Send channel NAME the operations alerts, or stop."""
    from models.alerts.channels import set_channel_ops

    view = set_channel_ops(ctx.db, name, is_ops)
    click.echo(f"Channel {view.name} {'gets' if view.is_ops else 'does not get'} the operations alerts.")


@alert.command("log")
@click.option("--channel", "channel_ref", help="Only this channel's alerts.")
@click.option("--state", type=click.Choice(["pending", "sent", "failed"]))
@click.option("--limit", type=int, default=100, show_default=True)
@format_option
@pass_context
def alert_log_command(ctx: Context, channel_ref: str | None, state: str | None, limit: int, fmt: str) -> None:
    """The alerts queued, newest first: state, attempts and the service's last answer."""
    from models.alerts.delivery import alert_log

    echo_rows(alert_log(ctx.db, channel=channel_ref, state=state, limit=limit), LOG_COLUMNS, fmt)


@alert.command("check")
@format_option
@pass_context
def alert_check(ctx: Context, fmt: str) -> None:
    """Run the operations checks now, as `lanner worker` does (a timer running this tells of a worker that
    is down); what started or cleared is queued to the operations channels."""
    from models.alerts.ops import ops_states
    from workers.runtime.alerting import run_ops_checks

    changes = run_ops_checks(ctx.settings, ctx.db)
    rows = [{**row, "since": ms_iso(row["since"])} for row in ops_states(ctx.db)]
    echo_rows(rows, ["check", "firing", "since", "detail"], fmt)
    for change in changes:
        word = "started" if change.verdict.is_firing else "cleared"
        click.echo(
            f"{change.verdict.name} {word}: {len(change.alert_ids)} alert(s) queued.", err=fmt != "table"
        )


@channel.command("set")
@click.argument("name")
@_field_options
@format_option
@pass_context
def channel_set(ctx: Context, name: str, fmt: str, **fields) -> None:
    """Change channel NAME's token, chat, URL or secret; alerts waiting for a retry go at once."""
    from models.alerts.channels import change_channel
    from models.alerts.senders import AlertConfig

    given = {key: sys.stdin.readline().strip() if value == "-" else value for key, value in fields.items()}
    _echo_channel(change_channel(ctx.db, name, given, config=AlertConfig.from_settings(ctx.settings)), fmt)
