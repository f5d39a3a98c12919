"""What summing the nodes' partials costs a report over the rollups (issue 33, point 2; migration 0036).

Starts a throwaway PostgreSQL (workers/bench/servers.py), generates --clicks clicks over --days days
into one database (their rollups in one partial, as a single box or a single node lands them), copies
it as a second database and there spreads every rollup row over --nodes partials (each count split in
equal parts, the remainder kept on partial 0, money likewise: the same sums, as when every node lands
some clicks of every key: the most rows the partials can make; with --sparse, a row of c clicks over
min(c, --nodes) partials only, as a key with one click in a period has one node's row). Then runs the
same reports on both, alternating, --runs times each, and prints each one's median wall ms on both
and the rows of the tables it reads; refuses to print if they answer differently. A third copy is
the spread one folded (models/reporting/partials.py, as `lanner db fold-partials` once the days are
closed): the same reports on it too, and the fold's own time. In the bench
because it rewrites the rollups with SQL of its own.

    .venv/bin/python scripts/partial_report_cost.py [--clicks 100000] [--days 7] [--nodes 4] [--runs 9]
        [--sparse]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta


def spread_over_partials(database, nodes: int, *, is_sparse: bool = False) -> None:
    """Every rollup row of partial 0 spread over partials 0..nodes-1, its sums kept; `is_sparse`: a
    row of c clicks over min(c, nodes) partials only (a key with one click has one node's row)."""
    from models.tables.dimensions import DIMENSIONS, METRICS, TABLES

    with database.atomic():
        for table, _, positions in TABLES:
            key = ", ".join(("period", *(DIMENSIONS[i] for i in positions)))
            parts = ", ".join(f"{metric} / {nodes}" for metric in METRICS)  # Counts: integer division.
            for node in range(1, nodes):
                database.execute_sql(
                    f"INSERT INTO {table} ({key}, {', '.join(METRICS)}, node) "
                    f"SELECT {key}, {parts}, {node} FROM {table} WHERE node = 0"
                    + (f" AND clicks > {node}" if is_sparse else "")
                )
            extra = f"LEAST(clicks - 1, {nodes - 1})" if is_sparse else str(nodes - 1)
            # SET's expressions read the row as it was: `clicks` in `extra` is the old count.
            kept = ", ".join(f"{metric} = {metric} - {extra} * ({metric} / {nodes})" for metric in METRICS)
            database.execute_sql(f"UPDATE {table} SET {kept} WHERE node = 0")
        database.execute_sql("ANALYZE")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clicks", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument(
        "--sparse", action="store_true", help="A row of c clicks in min(c, --nodes) partials."
    )
    args = parser.parse_args(argv)

    from models.migrations.deferred import run_deferred
    from models.migrations.runner import migrate
    from models.reporting.partials import fold_partials
    from models.reporting.reports import ReportQuery, run_report
    from models.store.database import connect
    from workers.bench.generate import generate_clicks
    from workers.bench.servers import PostgresServer

    server = PostgresServer(shared_buffers="128MB").start()
    databases = []
    try:
        name = server.create_database()
        one = connect(server.url(name))
        databases.append(one)
        migrate(one)
        end = datetime(2026, 11, 20, tzinfo=UTC)
        generate_clicks(one, args.clicks, args.days, seed=3, end_ms=int(end.timestamp() * 1000))
        run_deferred(one, pause=0)
        one.execute_sql("ANALYZE")
        one.close()
        spread_name = server.create_database(template=name)
        spread = connect(server.url(spread_name))
        databases.append(spread)
        spread_over_partials(spread, args.nodes, is_sparse=args.sparse)
        spread.close()
        # The spread copy again, its partials folded as `lanner db fold-partials` does once the days close.
        folded = connect(server.url(server.create_database(template=spread_name)))
        databases.append(folded)
        started = time.perf_counter()
        fold = fold_partials(folded, end.timestamp() + 3 * 86_400, days=args.days + 7)
        fold_seconds = time.perf_counter() - started
        folded.execute_sql("VACUUM ANALYZE")
        print(
            f"fold: {fold.rows} partial rows of {len(fold.days)} days folded in {fold.chunks} transactions, "
            f"{fold_seconds:.1f} s"
        )
        one = connect(server.url(name))
        databases[0] = one
        databases[1] = connect(server.url(spread_name))

        first = (end - timedelta(days=args.days)).date()
        days = dict(since=first.isoformat(), until=end.date().isoformat())
        hours = dict(since=f"{first.isoformat()}T05:00", until=f"{end.date().isoformat()}T00:00")
        queries = {
            "campaigns by day (rollup_campaign_day)": ReportQuery(group_by=("day", "campaign"), **days),
            "offer x country (rollup_campaign_country_day)": ReportQuery(
                group_by=("offer", "country"), **days
            ),
            "campaign x os x browser (rollup_day)": ReportQuery(
                group_by=("campaign", "os", "browser"), **days
            ),
            "campaign by hour, edge hours (rollup_hour + rollup_day)": ReportQuery(
                group_by=("hour", "campaign"), **hours
            ),
        }
        for label, query in queries.items():
            times: dict[int, list[float]] = {0: [], 1: [], 2: []}
            answers = {}
            for _ in range(args.runs):
                for n, database in enumerate(databases):
                    started = time.perf_counter()
                    report = run_report(database, query)
                    times[n].append((time.perf_counter() - started) * 1000)
                    answers[n] = [
                        {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
                        for row in report.rows
                    ]
            if not answers[0] == answers[1] == answers[2]:
                raise SystemExit(f"{label}: the partials answer differently")
            rows = [
                sum(
                    database.execute_sql(f"SELECT COUNT(*) FROM {source}").fetchone()[0]
                    for source in report.sources
                )
                for database in databases
            ]
            print(
                f"{label}: 1 partial {statistics.median(times[0]):.1f} ms ({rows[0]} rows), "
                f"{args.nodes} partials {statistics.median(times[1]):.1f} ms ({rows[1]} rows), "
                f"folded {statistics.median(times[2]):.1f} ms ({rows[2]} rows); "
                f"{len(report.rows)} report rows"
            )
    finally:
        for database in databases:
            database.close()
        server.stop()
