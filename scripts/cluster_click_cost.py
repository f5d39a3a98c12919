"""Shared-service CPU per cluster click, in process: workers/bench/clickcost.py.

.venv/bin/python scripts/cluster_click_cost.py [--visitors 2000] [--clicks 4000] [--rounds 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if __name__ == "__main__":
    from workers.bench.clickcost import main

    main()
