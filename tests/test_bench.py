"""The bench harness end to end at toy sizes: real k6, real server and worker, real database."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import LANNER, ROOT

pytestmark = pytest.mark.long


def test_bench_migration_upgrades_a_live_database_and_accounts_for_every_click(tmp_path, bench_env):
    out = tmp_path / "rehearsal.json"
    args = [
        "bench",
        "migration",
        "--clicks",
        "6000",
        "--recent",
        "2000",
        "--rate",
        "40",
        "--seconds",
        "12",
        "--data-dir",
        str(tmp_path / "rehearsal"),
        "--json",
        str(out),
    ]
    result = subprocess.run(
        [*LANNER, *args], env=bench_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["is_complete"] and report["migration"] == "0005_visitor_key"
    assert report["settings"]["pre_upgrade_schema"] == "0004_rollups"
    assert report["database"]["clicks"] == 6000
    # The recent part spans exactly the 24 h before it was generated; a few seconds have passed.
    assert 1900 < report["database"]["clicks_last_24h"] <= 2000
    steps = {step["name"]: step for step in report["steps"]}
    assert steps["visitor_key_backfill"]["state"] == "done"
    assert steps["visitor_key_backfill"]["units"] == 6000
    assert steps["visitor_key_index"]["state"] == "done"
    assert steps["click_visitor_drop"]["state"] == "pending"  # Waits out its grace period.
    load = report["load"]
    assert load["accepted"] > 0 and load["logged"] == load["accepted"]
    assert (load["lost"], load["duplicated"], load["errors"]) == (0, 0, 0)
    assert set(report["probes_us"]) == {"new", "returning", "nat"}
    assert "Upgrade to 0005_visitor_key on 6,000 clicks" in result.stdout

    # A second run reuses the pre-upgrade database: the same clicks, upgraded again from a copy.
    again = subprocess.run(
        [*LANNER, *args], env=bench_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Building the pre-upgrade database" not in again.stderr
    assert json.loads(out.read_text())["database"]["clicks"] == 6000


@pytest.mark.parametrize("command", [["clicks"], ["compare", "HEAD"], ["bandit-clicks"]])
@pytest.mark.parametrize(
    ("rates", "sentence"),
    [
        ("500,fast", "'500,fast' is not a comma-separated list of integers."),
        ("500,0", "every rate must be a positive integer."),
        (",", "every rate must be a positive integer."),
    ],
)
def test_every_ladder_command_refuses_a_bad_ladder_before_it_starts(command, rates, sentence):
    """The commands share their --rates (cli/options.py ladder_options): `compare` ran a ladder of 0/s.
    The `bench` group is invoked in this process, not `lanner` (whose group sets the umask and may hide
    the PostgreSQL driver from the process it runs in)."""
    from click.testing import CliRunner

    from cli.bench import bench

    result = CliRunner().invoke(bench, [*command, "--rates", rates])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--rates': {sentence}" in result.output


def test_judge_says_which_targets_a_run_missed_and_by_how_much():
    from workers.bench.harness import BenchReport, StepResult
    from workers.bench.suite import SUITE_SCENARIOS, judge

    def step(
        rate: int, accepted_per_s: float, p99_ms: float, lost: int = 0, rss: float = 150.0
    ) -> StepResult:
        result = StepResult("lanner", rate, 60, 10, 100, accepted_per_s=accepted_per_s, p99_ms=p99_ms)
        result.lost, result.duplicated, result.peak_rss_mb = lost, 0, rss
        return result

    failing = step(4000, 3500.0, 300.0)
    failing.errors = 7
    report = BenchReport(
        lanner=[step(2000, 2000.0, 106.5), step(3000, 2990.5, 150.0, lost=2, rss=231.0), failing]
    )
    verdicts = {v.target: v for v in judge(SUITE_SCENARIOS["unique"], report)}
    assert not verdicts["no lost click"].is_met and verdicts["no lost click"].miss == "2 lost over"
    assert verdicts["no duplicated click"].is_met
    assert verdicts["p99 at 2,000/s <= 100 ms"].miss == "6.5 ms over"
    # Capacity counts only steps served whole: the 3,000/s step lost clicks, the 4,000/s one erred.
    assert verdicts["3,000/s accepted (best error-free step)"].miss == "1000 /s short"
    assert verdicts["peak RSS of all Lanner processes <= 200 MB"].miss == "31 MB over"

    capacity = BenchReport(lanner=[step(3000, 2958.6, 150.0), step(4000, 3691.3, 320.0)])
    verdicts = {v.target: v for v in judge(SUITE_SCENARIOS["unique"], capacity)}
    assert verdicts["3,000/s accepted (best error-free step)"].measured == "3691.3 /s"
    assert verdicts["3,000/s accepted (best error-free step)"].is_met

    sustained = BenchReport(lanner=[step(2000, 1995.0, 40.0)])
    (lost, duplicated, holds) = judge(SUITE_SCENARIOS["sustained"], sustained)
    assert holds.is_met and holds.target == "holds 2000/s for 60 s (99 %)"


def test_bench_idle_measures_every_lanner_process_at_rest(tmp_path, bench_env):
    out = tmp_path / "idle.json"
    args = ["bench", "idle", "--seconds", "3", "--data-dir", str(tmp_path / "idle"), "--json", str(out)]
    result = subprocess.run(
        [*LANNER, *args], env=bench_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    idle = json.loads(out.read_text())["report"]
    # Master, two web workers and the Huey consumer (the admin worker starts on demand).
    assert idle["processes"] == 4
    assert idle["seconds"] >= 3 and idle["rss_mb"] > 0 and idle["pss_mb"] > 0
    # The verdict printed is the one measured: `idle CPU <= 1 % of one core: 0.33 %`.
    assert f"idle CPU <= 1 % of one core: {idle['cpu_percent_of_one_core']:g} %" in result.stdout


def test_bench_lander_reconciles_every_funnel_and_its_lp_click(tmp_path, bench_env):
    out = tmp_path / "lander.json"
    args = [
        "bench",
        "clicks",
        "--scenario",
        "lander",
        "--rates",
        "40",
        "--step-seconds",
        "3",
        "--no-nginx",
        "--data-dir",
        str(tmp_path / "lander"),
        "--json",
        str(out),
    ]
    result = subprocess.run(
        [*LANNER, *args], env=bench_env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (step,) = json.loads(out.read_text())["lanner"]
    assert step["accepted"] > 0 and (step["lost"], step["duplicated"], step["errors"]) == (0, 0, 0)
    side = step["side_load"]  # Every funnel's LP click on its row, in the rollups, counted for its offer.
    assert (
        side["lp_clicks_landed"] == side["lp_clicks_in_rollups"] == side["lp_offer_count"] == step["logged"]
    )


def test_bench_compare_alternates_which_side_runs_first_and_pairs_each_round():
    # The second run of a round read the lower p99 in all six rounds of main against itself: a side that
    # always ran second would be flattered by its place, not its code.
    from workers.bench.compare import ratios, round_order

    assert [round_order(number) for number in (1, 2, 3, 4)] == [
        ("old", "new"),
        ("new", "old"),
        ("old", "new"),
        ("new", "old"),
    ]
    p99 = {
        (1, "old"): 10.0,
        (1, "new"): 5.0,
        (2, "new"): 30.0,
        (2, "old"): 10.0,
        (3, "old"): 4.0,
        (3, "new"): 2.0,
    }
    runs = [
        {"round": number, "side": side, "report": {"lanner": [{"rate": 100, "p99_ms": p99[(number, side)]}]}}
        for number in (1, 2, 3)
        for side in round_order(number)
    ]
    (row,) = ratios(runs)
    assert row["p99_ms"] == 0.5  # Medians of 0.5, 3.0 and 0.5: NEW over OLD of the same round.


def test_bench_compare_runs_two_revisions_on_copies_of_one_database_asking_both_the_same_reports(
    tmp_path, bench_env
):
    from workers.bench.load import HEAVY_REPORTS

    out = tmp_path / "compare.json"
    args = ["bench", "compare", "HEAD", "HEAD", "--report-load", "--rates", "40", "--step-seconds", "3"]
    args += [
        "--rounds",
        "1",
        "--prefill",
        "2000",
        "--json",
        str(out),
        "--data-dir",
        str(tmp_path / "compare"),
    ]
    # Its scratch directory (HEAD's worktree among it: one for both sides) in this test's own TMPDIR:
    # another compare running on this repository meanwhile has worktrees of its own.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = subprocess.run(
        [*LANNER, *args],
        env={**bench_env, "TMPDIR": str(scratch)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    compared = json.loads(out.read_text())
    assert [(run["side"], run["revision"], run["round"]) for run in compared["runs"]] == [
        ("old", "HEAD", 1),
        ("new", "HEAD", 1),
    ]
    assert compared["report_load"] is True and compared["reports"] == list(HEAVY_REPORTS)
    for run in compared["runs"]:
        (step,) = run["report"]["lanner"]
        assert step["accepted"] > 0 and (step["lost"], step["duplicated"]) == (0, 0)
        assert run["report"]["settings"]["db_clicks_before"] >= 2000  # The copy of the prefilled database.
        # The client's reports, answered 200 beside the clicks (the step waits for the one in flight).
        assert step["side_load"]["reports"] >= 1 and step["side_load"]["report_p50_ms"] > 0
    (row,) = compared["ratios"]
    assert row["rate"] == 40 and row["accepted_per_s"] is not None and row["p99_ms"] is not None
    assert "Reports done beside each step" in result.stdout
    # The prefill in the columnar history each run copies: no run's worker copies it during its step.
    assert (tmp_path / "compare" / "pristine" / "history" / "clicks.duckdb").exists()
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True)
    assert str(scratch) not in worktrees.stdout  # Removed afterwards,
    assert not list(scratch.glob("lanner-compare-*"))  # with their directory.


def test_bench_compare_gives_old_the_report_client_of_new_only_if_old_needs_nothing_it_lacks(tmp_path):
    from workers.bench.compare import REPORT_CLIENT, share_report_client
    from workers.bench.harness import BenchError

    old, new = tmp_path / "old", tmp_path / "new"
    for tree, reports in ((old, ["/api/report?group=campaign"]), (new, ["/api/report?group=sub_id_1"])):
        (tree / "workers/bench").mkdir(parents=True)
        (tree / "tests").mkdir()
        (tree / REPORT_CLIENT).write_text(
            f"import threading\nHEAVY_REPORTS = {tuple(reports)!r}\n\n\nclass ReportLoad:\n    pass\n"
        )
    (old / "workers/bench/harness.py").write_text("from workers.bench.load import ReportLoad\n")
    # A test of OLD's importing what NEW's lacks does not count: the bench does not run it.
    (old / "tests/test_load.py").write_text("from workers.bench.load import _gone\n")
    assert share_report_client(old, new) == ["/api/report?group=sub_id_1"]
    assert (old / REPORT_CLIENT).read_text() == (new / REPORT_CLIENT).read_text()

    (old / "workers/bench/harness.py").write_text("from workers.bench.load import PostbackLoad, ReportLoad\n")
    (old / REPORT_CLIENT).write_text("before = 1\n")
    with pytest.raises(BenchError, match="imports PostbackLoad from workers/bench/load.py"):
        share_report_client(old, new)
    assert (old / REPORT_CLIENT).read_text() == "before = 1\n"  # Left as it was.


# -- `--cluster` (workers/bench/cluster.py) --------------------------------------------------


def test_bench_cluster_measures_two_nodes_beside_the_single_box_and_reconciles_both(monkeypatch):
    from conftest import _server_missing

    from workers.bench.cluster import ClusterOptions, ClusterReport, format_cluster_report, run_cluster_bench
    from workers.bench.harness import BenchOptions
    from workers.bench.servers import PostgresServer, RedisServer, ServerMissing
    from workers.bench.suite import judge_cluster

    try:
        PostgresServer(), RedisServer()
    except ServerMissing as error:
        _server_missing(error)
    # The tests' small country database instead of `lanner geo build` (10 s): the nodes get it too.
    monkeypatch.setenv(
        "LANNER_GEO_DATABASE", str(ROOT / "tests" / "fixtures" / "maxmind" / "GeoIP2-Country-Test.mmdb")
    )
    report = ClusterReport()
    options = BenchOptions(rates=[40], step_seconds=2, prefill=0, is_nginx_baseline=False)
    # The capacity step offered a set rate (the projection's would be hundreds a second here), then
    # the overload step twice what was accepted.
    # A short idle step: what it reads, not what it measures (the single box behind nginx, by default).
    shape = ClusterOptions(nodes=2, web_workers=1, is_overload=True, capacity_rate=60, idle_seconds=2)
    run_cluster_bench(options, report, shape=shape)

    assert report.is_complete
    (single,), (cluster,) = report.sqlite, report.cluster
    capacity, overload = report.capacity, report.overload
    assert capacity is not None and overload is not None
    assert capacity.rate == 60
    best = max(cluster.accepted_per_s, capacity.accepted_per_s)
    assert overload.rate == round(2 * best)
    # Twice the capacity really sent (VUs for 2 s of it, all allocated first), not dropped at k6.
    assert overload.pre_vus == overload.max_vus == 2 * overload.rate
    for step in (single, cluster, capacity, overload):
        assert step.accepted > 0 and step.logged == step.accepted, step
        assert (step.lost, step.duplicated) == (0, 0)
        assert step.server_cpu_us_per_click > 0 and step.flusher_cpu_us_per_click > 0
    # Every component of the cluster was measured while it served: CPU and memory.
    # nginx's share of 80 requests (~90 µs each) is under the kernel's 10 ms CPU tick as often as not,
    # and so is Redis's since a click asks it nothing (issue 33: a cap lease per block, Huey's polls):
    # measured means read, for them (their CPU counts in the real run's ratios).
    for name in ("serve", "flusher", "postgresql", "redis", "nginx"):
        part = cluster.components[name]
        assert part["peak_pss_mb"] > 0, (name, part)
        is_ticked = name not in ("nginx", "redis")
        assert part["cpu_seconds"] > 0 if is_ticked else part["cpu_seconds"] >= 0, (name, part)
    assert report.settings["cluster"]["nodes"] == ["node-1", "node-2"]
    assert report.settings["cluster"]["web_workers_per_node"] == 1
    (row,) = report.comparison()
    assert row["rate"] == 40 and row["cpu_per_click_ratio"] > 0 and row["cpu_per_click_ratio_all"] > 0
    # The single box was measured behind its own nginx; against it without nginx, the cluster's all is more.
    assert row["is_single_nginx"] and "nginx" in single.components
    assert row["cpu_per_click_ratio_all_vs_direct"] >= row["cpu_per_click_ratio"]
    # The idle step read every kind of process on both sides: the flusher's thread apart from the consumer's.
    idle = report.idle
    assert idle is not None and idle["cluster"]["nodes"] == 2
    assert {"web", "flusher", "consumer", "postgresql", "redis", "nginx"} <= set(idle["cluster"]["kinds"])
    assert {"web", "flusher", "consumer", "nginx"} <= set(idle["sqlite"]["kinds"])
    assert idle["cluster"]["kinds"]["flusher"]["units"] == 2  # One thread a node.
    assert idle["cluster"]["kinds"]["sweeps"]["units"] == 2 and "sweeps" not in idle["sqlite"]["kinds"]
    assert row["idle_us_per_click_all"]["cluster"] is not None
    # The projection is made of this run's figures: the shared part is PostgreSQL's plus Redis's.
    data = json.loads(json.dumps(report.to_json()))
    projection = data["projection"]
    us = projection["us_per_click"]
    assert us["shared"] == pytest.approx(us["postgresql"] + us["redis"], abs=0.15)
    # Redis's share may be under the kernel's tick (a click that asks Redis nothing): unbounded then.
    redis_carries = pytest.approx(1e6 / us["redis"], rel=0.01) if us["redis"] else None
    assert projection["redis_clicks_per_s"] == redis_carries
    box = projection["box"]
    # The overload step counts in the projection too (the most accepted may be there).
    assert box["measured_per_s"] == max(best, overload.accepted_per_s) and box["projected_per_s"] > 0
    summary = data["overload_summary"]
    assert summary["rate"] == overload.rate and summary["capacity_per_s"] == best
    # nginx never took the two nodes out: none of its answers was "no live upstreams".
    assert summary["no_live_upstreams"] == 0 and summary["is_met"], summary
    assert set(data["overload"]["components"]["nginx"]["log"]) >= {"no_live_upstreams", "timed_out"}
    verdicts = {verdict.target: verdict for verdict in judge_cluster(report)}
    assert verdicts["no lost click (both sides)"].is_met
    assert verdicts["no duplicated click (both sides)"].is_met
    assert verdicts["no 'no live upstreams' at twice capacity"].is_met
    lines = format_cluster_report(report)
    assert any(line.startswith("idle (") for line in lines)
    assert any(line.startswith("cluster") for line in lines)
    assert any(line.startswith("overload: ") for line in lines)


def test_cluster_reconciliation_and_caps_read_postgresql(postgres_migrated_url):
    import psycopg

    from workers.bench.cluster import check_caps
    from workers.bench.harness import reconcile_subids

    # Campaign 1. Stream 10: offer 5 twice, offer 6 once, then 50 clicks to no offer. Stream 20:
    # offer 8 once, then 60 clicks to offer 7.
    routes = [(10, 5), (10, 5), (10, 6)] + [(10, None)] * 50 + [(20, 8)] + [(20, 7)] * 60
    with psycopg.connect(postgres_migrated_url, autocommit=True) as connection:
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO click (subid, created_at, campaign_id, stream_id, offer_id, ip, user_agent, "
                "ua_hash) VALUES (%s, %s, 1, %s, %s, '192.0.2.1', 'UA', 0)",
                [(f"s{n:03}", n, stream, offer) for n, (stream, offer) in enumerate(routes)],
            )
    # A 302 subid missing from the table is lost; one answered twice is duplicated.
    assert reconcile_subids(postgres_migrated_url, ["s000", "s001", "s001", "gone"]) == (1, 1)
    assert reconcile_subids(postgres_migrated_url, [f"s{n:03}" for n in range(len(routes))]) == (0, 0)

    # Full: its stream took >= 50 clicks after the offer's last. Then it must hold exactly its cap.
    offers = [
        {"offer_id": 5, "name": "over", "cap": 1},  # 2 clicks: over its cap.
        {"offer_id": 6, "name": "filled", "cap": 1},  # Full, at its cap.
        {"offer_id": 8, "name": "short", "cap": 2},  # Full (60 clicks went on to offer 7), 1 short.
        {"offer_id": 7, "name": "open", "cap": 100},  # Its stream's last clicks: not full, under the cap.
        {"offer_id": 9, "name": "unused", "cap": 3},  # No click at all.
    ]
    caps = {row["name"]: row for row in check_caps(postgres_migrated_url, 1, offers)}
    assert {name: (row["clicks"], row["after_last"], row["is_exact"]) for name, row in caps.items()} == {
        "over": (2, 51, False),
        "filled": (1, 50, True),
        "short": (1, 60, False),
        "open": (60, 0, True),
        "unused": (0, 0, True),
    }
    assert (caps["filled"]["stream_clicks"], caps["filled"]["expected"]) == (53, 1)
