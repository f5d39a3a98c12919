"""The cluster bench's projection and issue 33's verdicts, over steps made here (no servers): the
arithmetic from per-component CPU a click to shared capacity, node count and this box's rate."""

from __future__ import annotations

import math

import pytest

from workers.bench.cluster import ClusterOptions, ClusterReport, capacity_offer
from workers.bench.harness import StepResult
from workers.bench.projection import project
from workers.bench.suite import judge_scale_out


def step(
    rate: int, accepted_per_s: float, us: dict[str, float], other: float = 0.0, seconds: int = 10
) -> StepResult:
    result = StepResult("cluster", rate, seconds, 10, 20)
    result.accepted = round(accepted_per_s * seconds)
    result.accepted_per_s = accepted_per_s
    result.components = {name: {"cpu_us_per_click": value, "cpu_seconds": 1.0} for name, value in us.items()}
    result.other_cores = other
    return result


COSTS = {"serve": 300.0, "flusher": 100.0, "postgresql": 40.0, "redis": 20.0, "nginx": 50.0, "k6": 90.0}


def test_the_projection_is_made_of_the_medians_of_the_steps_near_the_best_rate():
    costly = {**COSTS, "serve": 900.0, "postgresql": 400.0}  # Far below capacity: fixed costs weigh.
    steps = [
        step(500, 300.0, costly),
        step(1000, 1150.0, {**COSTS, "serve": 320.0, "postgresql": 44.0}, other=0.2),
        step(2000, 1200.0, COSTS, other=0.5),
    ]
    projection = project(steps, cpus=2)
    assert projection is not None and projection["basis_rates"] == [1000, 2000]  # >= 90 % of 1,200/s.
    us = projection["us_per_click"]
    assert (us["serve"], us["postgresql"], us["redis"]) == (310.0, 42.0, 20.0)
    assert us["node"] == 410.0 and us["shared"] == 62.0 and us["all"] == 522.0 and us["box"] == 612.0
    assert projection["is_shared_met"]
    assert projection["postgresql_clicks_per_s"] == pytest.approx(8e6 / 42, abs=0.1)
    assert projection["redis_clicks_per_s"] == 50_000.0  # Redis is the limit: 1 core / 20 µs.
    assert projection["shared_limit"] == "redis" and projection["is_target_met"]
    assert projection["nodes_to_shared_limit"] == math.ceil(50_000 / (2e6 / 410))
    # This box: the best step (1,200/s) had 2 - 0.5 cores; every process a click 612 µs.
    box = projection["box"]
    assert box["cores"] == 1.5 and box["measured_per_s"] == 1200.0
    assert box["projected_per_s"] == pytest.approx(1.5e6 / 612, abs=0.1)
    assert box["ratio"] == pytest.approx(1200 / (1.5e6 / 612), abs=0.001)
    assert not box["is_within_tolerance"]  # 1,200 against ~2,451.
    assert any("min(" in line for line in projection["arithmetic"])


def test_a_projection_needs_postgresql_and_redis_measured():
    steps = [step(1000, 600.0, COSTS), step(2000, 640.0, {**COSTS, "redis": 30.0})]
    projection = project(steps, cpus=2)
    assert projection["basis_rates"] == [1000, 2000] and "640.0/s" in projection["basis"]
    assert projection["us_per_click"]["redis"] == 25.0
    assert project([step(500, 500.0, {"serve": 1.0})], cpus=2) is None  # No PostgreSQL measured.
    assert project([], cpus=2) is None
    # A click that asks Redis nothing: Redis is no limit, PostgreSQL is.
    unbounded = project([step(1000, 900.0, {**COSTS, "redis": 0.0})], cpus=2)
    assert unbounded["redis_clicks_per_s"] is None and unbounded["shared_limit"] == "postgresql"
    assert unbounded["shared_clicks_per_s"] == 200_000.0  # 8 vCPU / 40 µs.


def test_issue_33_verdicts_read_the_ratio_projection_and_overload():
    single = {"serve": 200.0, "flusher": 100.0}
    report = ClusterReport(cpus=2)
    report.sqlite = [step(500, 500.0, single), step(1000, 1000.0, single)]
    report.cluster = [step(500, 500.0, COSTS), step(1000, 1000.0, {**COSTS, "serve": 600.0})]
    verdicts = {verdict.target: verdict for verdict in judge_scale_out(report)}
    # (300 + 100 + 40 + 20 + 50) / 300 = 1.7; with a 600 µs web worker 2.7.
    assert [row["cpu_per_click_ratio_all"] for row in report.comparison()] == [1.7, 2.7]
    assert not verdicts["cluster CPU a click at 500/s <= 1.5x the single box"].is_met
    assert verdicts["PostgreSQL + Redis CPU a click"].is_met
    assert "accepted within 10 % of this box's projection" not in verdicts  # No capacity step.
    # The basis is the 1,000/s step alone (500/s is under 90 % of it): 600 + 100 + 40 + 20 + 50 + k6 90
    # = 900 µs on 2 cores, 2,222/s; twice that, to the nearest 50.
    assert capacity_offer(report, ClusterOptions()) == 4450
    report.capacity = step(2500, 2000.0, COSTS, other=0.1)
    report.overload = step(4000, 1500.0, COSTS)
    report.overload.errors_by_code = {"504": 7}
    report.overload.components["nginx"]["log"] = {"no_live_upstreams": 0}
    verdicts = {verdict.target: verdict for verdict in judge_scale_out(report)}
    assert verdicts["no 'no live upstreams' at twice capacity"].is_met
    assert verdicts["no 502/503 at twice capacity"].is_met  # A 504 is latency past nginx's wait.
    report.overload.errors_by_code = {"502": 3}
    assert not report.overload_summary()["is_met"]


def test_the_cluster_shape_options_need_cluster_and_rates_are_checked_before_anything_starts():
    from click.testing import CliRunner

    from cli.bench import bench

    runner = CliRunner()
    result = runner.invoke(bench, ["unique", "--nodes", "4", "--web-workers", "1"])
    assert result.exit_code == 2 and "go with --cluster" in result.output, result.output
    result = runner.invoke(bench, ["unique", "--cluster", "--rates", "500,0"])
    assert result.exit_code == 2 and "every rate must be a positive integer" in result.output, result.output
    assert ClusterOptions(nodes=4, web_workers=1).node_names() == ["node-1", "node-2", "node-3", "node-4"]
    assert ClusterOptions(nodes=4).workers_per_node(2) == 1  # --workers split, at least one a node.
    assert ClusterOptions(nodes=2, web_workers=3).workers_per_node(2) == 3


def test_with_the_single_box_behind_nginx_both_ratios_are_like_for_like_and_the_idle_cost_is_separated():
    from workers.bench.cluster import format_cluster_report

    report = ClusterReport(cpus=2)
    report.sqlite = [step(500, 500.0, {"serve": 200.0, "flusher": 100.0, "nginx": 40.0})]
    report.cluster = [step(500, 500.0, COSTS)]
    # The idle step: ms of CPU a second per kind, the whole cluster (4 nodes) and the single box.
    kinds = {"web": 4.0, "flusher": 2.0, "consumer": 6.0, "postgresql": 1.0, "redis": 2.0, "nginx": 0.5}
    report.idle = {
        "seconds": 60.0,
        "sqlite": {
            "kinds": {"web": {"ms_per_s": 1.0}, "consumer": {"ms_per_s": 1.5}},
            "ms_per_s": 2.5,
            "nodes": 1,
        },
        "cluster": {
            "kinds": {
                kind: {"ms_per_s": value, "ms_per_s_per_node": value / 4} for kind, value in kinds.items()
            },
            "ms_per_s": 15.5,
            "nodes": 4,
        },
    }
    (row,) = report.comparison()
    assert row["is_single_nginx"]
    assert row["cpu_per_click_ratio"] == round((300 + 100 + 40 + 20) / 300, 2)  # No nginx on either side.
    assert row["cpu_per_click_ratio_all"] == round(510 / 340, 2)  # nginx on both sides.
    assert row["cpu_per_click_ratio_all_vs_direct"] == 1.7  # The bench's measure before: 510 / 300.
    # 15.5 ms a second over 500 clicks a second is 31 µs a click; 15 without the cluster's nginx.
    assert row["idle_us_per_click_all"] == {"cluster": 31.0, "sqlite": 5.0}
    assert row["idle_us_per_click_no_nginx"] == {"cluster": 30.0, "sqlite": 5.0}
    assert row["cpu_per_click_ratio_all_net_of_idle"] == round((510 - 31) / (340 - 5), 2)
    assert row["cpu_per_click_ratio_no_nginx_net_of_idle"] == round((460 - 30) / (300 - 5), 2)
    # The verdict reads the like-for-like ratio: 1.5, met.
    verdicts = {verdict.target: verdict for verdict in judge_scale_out(report)}
    assert verdicts["cluster CPU a click at 500/s <= 1.5x the single box"].is_met
    lines = format_cluster_report(report)
    assert any(line.startswith("idle (60 s, no traffic)") for line in lines)
    consumer = next(line for line in lines if line.strip().startswith("consumer"))
    assert consumer.split() == ["consumer", "1.50", "6.00", "1.50", "12.0"]  # 6 ms/s at 500/s: 12 µs.
