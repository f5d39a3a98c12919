"""Measure a run of the automation rules: `python scripts/bench_rules.py [CLICKS ZONES RULES]`.

Prints the timings as JSON (workers/bench/rulerun.py says what it builds); docs/optimisation.md
quotes them.
"""

from __future__ import annotations

import json
import sys

from workers.bench.rulerun import measure_rules


def main(argv: list[str]) -> None:
    counts = [int(arg.replace("_", "")) for arg in argv[1:4]]
    print(json.dumps(measure_rules(*counts), indent=2))


if __name__ == "__main__":
    main(sys.argv)
