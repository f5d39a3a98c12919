"""How big a batch a real `lanner worker` lands under load on PostgreSQL: workers/bench/flushbatches.py.

.venv/bin/python scripts/flush_batch_run.py [--rate 400] [--seconds 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if __name__ == "__main__":
    from workers.bench.flushbatches import main

    main()
