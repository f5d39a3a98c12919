"""PostgreSQL's CPU per click landed by N concurrent flushers of one campaign: workers/bench/flushcost.py.

.venv/bin/python scripts/flush_pg_cost.py [--nodes 4] [--clicks 5000] [--batch 2000]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if __name__ == "__main__":
    from workers.bench.flushcost import main

    main()
