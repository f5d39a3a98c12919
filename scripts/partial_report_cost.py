"""What summing the nodes' partials costs a report over the rollups: workers/bench/partialreport.py.

.venv/bin/python scripts/partial_report_cost.py [--clicks 100000] [--days 7] [--nodes 4] [--runs 9] [--sparse]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if __name__ == "__main__":
    from workers.bench.partialreport import main

    main()
