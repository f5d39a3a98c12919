"""`lanner geo`: the geo database routing uses."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.context import Context, pass_context


@click.group()
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
            f"{result.edition}: {result.database_type} built {result.built_at.date()}, {verb} "
            f"({result.path})."
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
