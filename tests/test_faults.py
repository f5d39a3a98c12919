"""The fault suite's short version (`lanner bench faults --quick`): every fault of docs/RELIABILITY.md
under real traffic (k6 at 50 clicks/s against a real `lanner serve` + `lanner worker`), with every
subid that got a 302 reconciled against the click table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import TEST_COUNTRY_DATABASE

from workers.bench.faults import FaultRow, SharedStack, describe, faults, is_shareable, run_fault
from workers.bench.harness import ROOT

pytestmark = pytest.mark.long

QUICK_FAULTS = faults(quick=True)
# Run through the CLI below (its table and JSON), not a second time here: each fault costs ~15 s.
CLI_FAULT = "kill-web-worker"


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    """The rows' shared directory, with the tests' small country database where run_fault looks for
    one it built: `lanner geo build` cost ~3.5 s of CPU in every test process (the traffic is local)."""
    work_dir = tmp_path_factory.mktemp("faults")
    shutil.copyfile(TEST_COUNTRY_DATABASE, work_dir / "country.mmdb")
    return work_dir


@pytest.fixture(scope="module")
def shared_stack(work_dir):
    """One running stack for the rows whose subject is the fault under traffic, not the stack's start
    (faults.SHARED_STACK_FAULTS), each row still reconciled on its own 302s' subids and judged by its
    own checks. Started by the first of them to run, in whichever order they come."""
    stack = SharedStack(work_dir, quick=True)
    yield stack
    stack.stop()


def fault_row(name: str):
    if is_shareable(QUICK_FAULTS[name]):  # One process runs them all under `--dist loadgroup`.
        return pytest.param(name, marks=pytest.mark.xdist_group("faults_shared_stack"))
    return name


@pytest.mark.parametrize("name", [fault_row(name) for name in QUICK_FAULTS if name != CLI_FAULT])
def test_fault_loses_nothing_duplicates_nothing_and_recovers_by_itself(name, work_dir, request):
    fault = QUICK_FAULTS[name]
    if is_shareable(fault):
        row = request.getfixturevalue("shared_stack").run_fault(fault)
    else:
        row = run_fault(fault, work_dir, quick=True)
    if row.skipped:
        pytest.skip(row.skipped)
    assert row.redirects > 0, describe(row)
    # Only a power cut may lose clicks: those whose line was past its segment's last fsync.
    assert row.lost == row.lost_allowed, describe(row)
    assert row.lost_allowed == 0 or name == "power-cut", describe(row)
    assert row.duplicated == 0, describe(row)
    assert row.errors_500 == 0, describe(row)
    assert row.problems == [], describe(row)
    assert row.recovery_s is not None and row.recovery_s <= 10, describe(row)


def test_a_row_misses_its_target_when_a_click_is_lost_or_recovery_is_slow():
    good = FaultRow("x", "x", requests=10, redirects=10, recovery_s=1.0)
    assert good.is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, lost=1, recovery_s=1.0).is_met
    assert FaultRow("x", "x", requests=10, redirects=10, lost=2, lost_allowed=2, recovery_s=1.0).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, lost=2, lost_allowed=1, recovery_s=1.0).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, duplicated=1, recovery_s=1.0).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, errors_500=1, recovery_s=1.0).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, recovery_s=10.5).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, recovery_s=None).is_met
    assert not FaultRow("x", "x", requests=10, redirects=10, recovery_s=1.0, problems=["bad"]).is_met


def test_bench_faults_prints_one_row_per_fault_and_writes_json(tmp_path):
    """The CLI's run of CLI_FAULT is that fault's test too: `is_met` holds every check above."""
    out = tmp_path / "faults.json"
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "faults", "--quick", "--only", CLI_FAULT, "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "LANNER_GEO_DATABASE": str(TEST_COUNTRY_DATABASE)},  # Not `lanner geo build`.
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    header, row = [line.split() for line in result.stdout.splitlines()[:2]]
    assert header[:4] == ["fault", "requests", "302s", "lost"]
    assert row[0] == CLI_FAULT and row[-1] == "met"
    data = json.loads(out.read_text())
    assert [fault["name"] for fault in data["faults"]] == [CLI_FAULT]
    fault = data["faults"][0]
    assert fault["redirects"] > 0 and fault["lost"] == 0 and fault["duplicated"] == 0, fault
    assert fault["errors_500"] == 0 and fault["problems"] == [] and fault["is_met"] is True, fault


def test_an_unknown_fault_is_one_sentence_naming_the_faults():
    result = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "faults", "--only", "kill-everything-twice"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "unknown fault(s) kill-everything-twice" in result.stderr
    assert "kill-web-worker" in result.stderr
