"""`lanner bench compare OLD NEW`: two git revisions, the same ladder, the same database, as ratios.

Each revision is checked out into a temporary git worktree and runs its own `lanner bench clicks` (same
Python and venv as this one; a revision with workers/runtime/bjoern-3.2.2 builds its own bjoern there).
The database is prefilled once, by the older revision (its columnar history made from it then, so that
no run's worker copies the prefill into the history during its step), and every run starts from a fresh
copy of both, migrated, with its deferred steps done and its history's upkeep caught up (closed days
compacted, the sub id cube built) by the revision under test before the load, so neither pays for the
other's leftovers or for the prefill's one-time work. (OLD without a columnar history, as before issue 28,
leaves the prefill without one: NEW's runs each make theirs from their copy, before the load.) Runs
alternate, and which side goes first alternates by round (OLD, NEW, then NEW, OLD, ...): the machine's
drift hits both, and neither is always the run after the other (main against itself read the second run's
p99 lower in all six rounds of one window). The ratios are medians over rounds.

With `report_load`, each run's `lanner bench clicks --report-load` has one client request heavy reports
back to back during every step, and both sides are asked the same reports: NEW's
workers/bench/load.py (its `HEAVY_REPORTS` and the client) is copied over OLD's in OLD's temporary
worktree before its runs, once it is checked that what OLD's code imports from that module NEW's still
defines. Each step's reports done and their p50 stay in its `side_load`, as in a plain run.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from workers.bench.harness import HISTORY_UPKEEP, ROOT, BenchError, Reporter, lanner_env

RATIO_FIELDS = (
    "accepted_per_s",
    "p50_ms",
    "p99_ms",
    "server_cpu_us_per_click",
    "flusher_cpu_us_per_click",
    "peak_pss_mb",
)


def _git(*args: str) -> str:
    result = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise BenchError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def _lanner(worktree: Path, env: dict[str, str], *args: str, timeout: float = 3600) -> str:
    """Run that revision's CLI (its own code, this venv's Python)."""
    env = {**env, "PYTHONPATH": str(worktree)}
    result = subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise BenchError(
            f"lanner {' '.join(args)} at {worktree.name} failed:\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def _install_pypi_bjoern(worktree: Path) -> None:
    """A revision from before workers/runtime/bjoern-3.2.2 imports PyPI's bjoern, at the version its
    pyproject.toml pins: installed into its tree (on its PYTHONPATH) when this venv has none."""
    pinned = re.search(r'"bjoern==([^"]+)"', (worktree / "pyproject.toml").read_text())
    if pinned is None or importlib.util.find_spec("bjoern") is not None:
        return
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
        + ["--target", str(worktree), f"bjoern=={pinned.group(1)}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise BenchError(f"cannot install bjoern=={pinned.group(1)} at {worktree.name}:\n{result.stderr}")


def _build_extension(worktree: Path) -> None:
    """Build the revision's own bjoern (from workers/runtime/bjoern-3.2.2, as pyproject.toml's ext-modules
    say) in its tree; a revision from before it gets PyPI's."""
    if not (worktree / "workers/runtime/bjoern-3.2.2").is_dir():
        _install_pypi_bjoern(worktree)
        return
    result = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_ext", "--inplace"],
        cwd=worktree,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise BenchError(f"cannot build bjoern at {worktree.name}:\n{result.stdout}{result.stderr}")


REPORT_CLIENT = "workers/bench/load.py"


def _module_names(path: Path) -> set[str]:
    """What a module defines at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _imported_from_report_client(worktree: Path) -> set[str]:
    """The names a revision's own code imports from its workers/bench/load.py."""
    names: set[str] = set()
    for path in worktree.rglob("*.py"):
        if "tests" in path.relative_to(worktree).parts:
            continue  # What the bench runs, not its tests.
        if "workers.bench.load" not in (text := path.read_text(errors="replace")):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == "workers.bench.load":
                names.update(alias.name for alias in node.names)
    return names


def _heavy_reports(worktree: Path) -> list[str]:
    for node in ast.parse((worktree / REPORT_CLIENT).read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "HEAVY_REPORTS" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise BenchError(f"{REPORT_CLIENT} at {worktree.name} has no HEAVY_REPORTS")


def share_report_client(old_tree: Path, new_tree: Path) -> list[str]:
    """NEW's report client over OLD's, so both sides are asked the same reports: NEW's list may hold
    reports OLD's had not (issue 28 added the ones only the columnar history answers fast, which OLD
    answers by scanning raw rows). The reports asked, for the result."""
    reports = _heavy_reports(new_tree)
    if old_tree == new_tree:
        return reports
    missing = _imported_from_report_client(old_tree) - _module_names(new_tree / REPORT_CLIENT)
    if missing:
        raise BenchError(
            f"{old_tree.name} imports {', '.join(sorted(missing))} from {REPORT_CLIENT}, which "
            f"{new_tree.name}'s does not define: its report client cannot replace OLD's"
        )
    shutil.copyfile(new_tree / REPORT_CLIENT, old_tree / REPORT_CLIENT)
    return reports


def _copy_data(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    # The columnar history with the database it was copied from: without it, each run's worker would
    # copy the whole prefill into a new one during the step, and that would be the flusher's CPU a click.
    for name in ("lanner.db", "geo", "history"):
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name)
        elif path.exists():
            shutil.copyfile(path, target / name)


def _catch_up_history(worktree: Path, env: dict[str, str], data_dir: Path) -> None:
    commands = HISTORY_UPKEEP
    if not (data_dir / "history").exists():  # A prefill by a revision without one: see the docstring.
        commands = (("analytics", "rebuild"), *commands)
    for command in commands:
        try:
            _lanner(worktree, env, *command)
        except BenchError:
            pass  # A revision from before that step has none to do.


def round_order(number: int) -> tuple[str, str]:
    """The sides in the order round `number` (from 1) runs them: OLD first in odd rounds, NEW in even."""
    return ("old", "new") if number % 2 else ("new", "old")


def ratios(runs: list[dict]) -> list[dict]:
    """Per rate and field: median over rounds of NEW / OLD of the same round."""
    by_round: dict[tuple[int, str], dict[int, dict]] = {}
    for run in runs:
        by_round[(run["round"], run["side"])] = {step["rate"]: step for step in run["report"]["lanner"]}
    rounds = sorted({run["round"] for run in runs})
    rates = sorted({rate for steps in by_round.values() for rate in steps})
    table = []
    for rate in rates:
        row: dict = {"rate": rate}
        for name in RATIO_FIELDS:
            values = []
            for number in rounds:
                a = by_round.get((number, "old"), {}).get(rate, {}).get(name)
                b = by_round.get((number, "new"), {}).get(rate, {}).get(name)
                if a and b is not None:
                    values.append(b / a)
            row[name] = round(statistics.median(values), 3) if values else None
        table.append(row)
    return table


def run_compare(
    old: str,
    new: str,
    *,
    scenario: str,
    rates: list[int],
    step_seconds: int,
    rounds: int,
    prefill: int,
    workers: int,
    data_dir: Path,
    reporter: Reporter,
    report_load: bool = False,
) -> dict:
    revisions = {"old": old, "new": new}  # By side: OLD and NEW may name the same commit.
    shas = {side: _git("rev-parse", "--verify", f"{rev}^{{commit}}") for side, rev in revisions.items()}
    work = Path(tempfile.mkdtemp(prefix="lanner-compare-"))
    # One worktree (and one bjoern build) for a commit both sides name: the same code, built the same.
    trees = {side: work / f"tree-{shas[side][:12]}" for side in revisions}
    pristine = data_dir / "pristine"
    result: dict = {
        "revisions": {side: {"revision": revisions[side], "commit": shas[side]} for side in revisions},
        "scenario": scenario,
        "rates": rates,
        "step_seconds": step_seconds,
        "report_load": report_load,
        "runs": [],
    }
    try:
        for side, tree in trees.items():
            if not tree.exists():
                _git("worktree", "add", "--detach", str(tree), shas[side])
                _build_extension(tree)
        if report_load:
            result["reports"] = share_report_client(trees["old"], trees["new"])
        if not (pristine / "lanner.db").exists():
            reporter.message(f"Prefilling {prefill:,} clicks with {old} into {pristine} ...")
            pristine.mkdir(parents=True, exist_ok=True)
            env = lanner_env(pristine)
            _lanner(trees["old"], env, "db", "migrate")
            _lanner(trees["old"], env, "generate", "clicks", "--count", str(prefill), "--seed", "1")
            if "LANNER_GEO_DATABASE" not in env:  # As prepare_database: a country database of the user's.
                _lanner(trees["old"], env, "geo", "build")
        if not (pristine / "history").exists():  # Also for a database prefilled before it was made here.
            try:
                _lanner(trees["old"], lanner_env(pristine), "analytics", "rebuild")  # See _copy_data.
            except BenchError:
                pass  # A revision from before the columnar history has none to make.
        for number in range(1, rounds + 1):
            for side in round_order(number):
                rev = revisions[side]
                run_dir, out = work / "run", work / f"{number}-{side}.json"
                _copy_data(pristine, run_dir)
                env = lanner_env(run_dir)
                _lanner(trees[side], env, "db", "migrate")
                try:
                    _lanner(trees[side], env, "db", "run-deferred")
                except BenchError:
                    pass  # A revision from before deferred steps has none to run.
                _catch_up_history(trees[side], env, run_dir)
                reporter.message(f"Round {number}/{rounds}: {side} = {rev} ({shas[side][:10]}) ...")
                _lanner(
                    trees[side],
                    env,
                    "bench",
                    "clicks",
                    "--scenario",
                    scenario,
                    "--rates",
                    ",".join(map(str, rates)),
                    "--step-seconds",
                    str(step_seconds),
                    "--workers",
                    str(workers),
                    "--data-dir",
                    str(run_dir),
                    "--no-nginx",
                    "--json",
                    str(out),
                    *(["--report-load"] if report_load else []),
                )
                report = json.loads(out.read_text())
                result["runs"].append({"side": side, "revision": rev, "round": number, "report": report})
        result["ratios"] = ratios(result["runs"])
    finally:
        for tree in trees.values():
            if tree.exists():
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                    timeout=60,
                )
        shutil.rmtree(work, ignore_errors=True)
    return result


def format_compare(result: dict) -> list[str]:
    old, new = (result["revisions"][side]["revision"] for side in ("old", "new"))
    lines = [f"{new} / {old}, median over rounds (below 1 is better for latency, CPU and memory):"]
    header = ["rate", *RATIO_FIELDS]
    rows = [
        [str(row["rate"]), *(str(row[name]) for name in RATIO_FIELDS)] for row in result.get("ratios", [])
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for cells in (header, *rows):
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)))
    if result.get("report_load"):
        lines.append("Reports done beside each step (their p50):")
        for run in result["runs"]:
            steps = ", ".join(
                f"{step['rate']}/s: {step['side_load'].get('reports')} "
                f"({step['side_load'].get('report_p50_ms')} ms)"
                for step in run["report"]["lanner"]
            )
            lines.append(f"  round {run['round']} {run['side']}: {steps}")
    return lines
