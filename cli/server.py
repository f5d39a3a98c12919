"""`lanner serve`, `lanner worker` and `lanner run`: the processes.

`lanner serve`'s master must not import the app (a graceful reload starts workers on freshly
imported code): the app and the models are imported inside the commands, or in a forked child."""

from __future__ import annotations

import contextlib
import os
import sys

import click

from cli.context import Context, pass_context
from cli.geo import build_geo
from cli.users import first_admin_line, panel_line
from settings import Settings
from workers.runtime.logs import configure_logging


@click.command("serve")
@click.option("--workers", type=int, help="Worker processes (default LANNER_WORKERS).")
@click.option("--bind", help="HOST:PORT or unix:/PATH (default LANNER_BIND).")
@click.option("--max-requests", type=int, help="Recycle a worker after this many requests (0 = never).")
@click.option(
    "--admin-bind", help="The report API worker's HOST:PORT or unix:/PATH, or off (LANNER_ADMIN_BIND)."
)
@pass_context
def serve_command(
    ctx: Context, workers: int | None, bind: str | None, max_requests: int | None, admin_bind: str | None
) -> None:
    """Run the web master, its bjoern workers and the report API worker in the foreground."""
    from workers.ops.status import recorded_pid
    from workers.runtime.server import parse_bind, serve

    changes = {"workers": workers, "bind": bind, "max_requests": max_requests, "admin_bind": admin_bind}
    settings = ctx.settings.replace(**{k: v for k, v in changes.items() if v is not None})
    try:
        parse_bind(settings.bind)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        if settings.admin_address:
            parse_bind(settings.admin_address)
    except ValueError as exc:
        message = (
            f"{exc} That is the report API worker's address: set LANNER_ADMIN_BIND to another address, "
            "or to off."
        )
        raise click.ClickException(message) from None
    check_schema_apart(settings)
    configure_logging(settings)
    with recorded_pid(settings), listen_errors():
        serve(
            settings,
            load_app,
            admin_loader=load_admin_app,
            on_ready=lambda binds: click.echo(f"Lanner listening on {binds['web']}", err=True),
        )


@contextlib.contextmanager
def listen_errors():
    """A socket that cannot be bound is one sentence, not a traceback."""
    try:
        yield
    except OSError as exc:
        if "cannot listen on" not in str(exc):
            raise
        raise click.ClickException(
            f"{exc.strerror} (LANNER_BIND and LANNER_ADMIN_BIND choose the addresses; "
            "LANNER_ADMIN_BIND=off runs no admin worker)."
        ) from None


def load_app(settings: Settings):
    from app import load_worker_app

    return load_worker_app(settings)


def load_admin_app(settings: Settings):
    from app import load_admin_app as load

    return load(settings)


def check_schema(settings: Settings) -> None:
    """Refuse to start against a database older than the code, or on a spool that is another node's
    (models/clicks/node.py: the spool's name is written here on first start), with the fix in the message."""
    from models.clicks.node import ensure_spool_node, refuse_a_second_node_alone
    from models.migrations.runner import require_current_schema
    from models.store.database import open_database

    node = ensure_spool_node(settings.spool_dir, settings.node_id)
    database = open_database(settings.database_location)
    try:
        require_current_schema(database, settings.database_shown)
        if not settings.redis_url:
            refuse_a_second_node_alone(database, node.name)
    finally:
        database.close()


def check_schema_apart(settings: Settings) -> None:
    """check_schema in a forked child, so the process (`lanner serve`'s master) never imports the
    models and the database driver: 6 MB it would keep for as long as it runs."""
    from models.errors import LannerError  # Light: the module holds one class.

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            check_schema(settings)
        except LannerError as exc:
            os.write(write_end, str(exc).encode())
            code = 1
        except BaseException as exc:  # noqa: BLE001 - the parent says it in one sentence.
            os.write(write_end, f"Cannot read the schema of {settings.database_shown}: {exc}".encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        message = reader.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise click.ClickException(message or "The database schema check failed.")


@click.command("worker")
@pass_context
def worker_command(ctx: Context) -> None:
    """Run the Huey consumer (spool flusher and background tasks) in the foreground."""
    from workers.runtime.tasks import run_consumer

    check_schema(ctx.settings)
    configure_logging(ctx.settings)
    run_consumer(ctx.settings)


@click.command("run")
@pass_context
def run_command(ctx: Context) -> None:
    """Everything for a first look: migrate, a demo campaign and the first admin if none, serve + worker."""
    import signal
    import subprocess

    from models.accounts.users import ensure_first_admin
    from models.admin.services import first_campaign
    from models.migrations.runner import migrate
    from models.reporting.currency import adopt_report_currency
    from models.store.database import open_database

    settings = ctx.settings
    database = open_database(settings.database_location, autocheckpoint=True)
    migrate(database)
    adopt_report_currency(database, settings.report_currency)
    if not settings.geo_path.exists():
        build_geo(settings.geo_path)
    demo = first_campaign(database)
    first_admin = ensure_first_admin(database)
    database.close()
    click.echo(panel_line(settings), err=True)
    if first_admin:
        click.echo(first_admin_line(*first_admin), err=True)
    worker = subprocess.Popen([sys.executable, "-m", "cli", "worker"])
    host = settings.bind if settings.bind.startswith("unix:") else f"http://{settings.bind}"
    click.echo(f"Demo campaign URL: {host}/{demo.alias}?source=test&sub1=hello", err=True)
    if settings.admin_address.startswith("unix:"):
        click.echo(
            "Report API (X-Api-Key: `lanner api key show`): "
            f"curl --unix-socket {settings.admin_address[5:]} http://localhost/api/report",
            err=True,
        )
    elif settings.admin_address:
        click.echo(
            f"Report API (X-Api-Key: `lanner api key show`): {settings.admin_address}/api/report", err=True
        )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        configure_logging(settings)
        from workers.ops.status import recorded_pid
        from workers.runtime.server import serve

        with recorded_pid(settings), listen_errors():
            serve(settings, load_app, admin_loader=load_admin_app)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.wait(timeout=30)
