"""Options several commands take, and the parsing of option values into what the services take."""

from __future__ import annotations

from collections.abc import Iterable

import click


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


def parse_offers(values: Iterable[str]) -> list[tuple[int, int]]:
    offers = []
    for value in values:
        offer_id, _, weight = value.partition(":")
        if not offer_id.isdigit() or (weight and not weight.isdigit()):
            raise click.BadParameter(f"{value!r} is not OFFER_ID or OFFER_ID:WEIGHT.", param_hint="--offer")
        offers.append((int(offer_id), int(weight or 100)))
    return offers


def cap_options(function):
    """--daily-cap/--total-cap: clicks a stream or offer takes per local day / in total."""
    function = click.option("--total-cap", type=click.IntRange(min=0), help="Clicks in total.")(function)
    return click.option(
        "--daily-cap", type=click.IntRange(min=0), help="Clicks per day (local midnight rollover)."
    )(function)


def parse_ladder(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    """--rates as the bench commands take it: comma-separated clicks/s, each a positive integer."""
    try:
        ladder = [int(rate) for rate in value.split(",") if rate.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers.") from None
    if not ladder or min(ladder) <= 0:
        raise click.BadParameter("every rate must be a positive integer.")
    return ladder


def ladder_options(*, rates: str, step_seconds: int):
    """--rates/--step-seconds: the click ladder a bench command offers, its steps' rates parsed into a
    list of positive clicks/s."""

    def decorate(function):
        function = click.option(
            "--step-seconds", type=click.IntRange(min=1), default=step_seconds, show_default=True
        )(function)
        return click.option(
            "--rates",
            default=rates,
            show_default=True,
            callback=parse_ladder,
            help="Offered clicks/s per step.",
        )(function)

    return decorate
