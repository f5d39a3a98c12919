"""A web worker's CPU per request, floor by floor (bare WSGI, bare Falcon, Lanner's click):
workers/bench/httpfloor.py.

.venv/bin/python scripts/http_floor.py [--requests 20000] [--rounds 5] [--variants wsgi,falcon,lanner]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if __name__ == "__main__":
    from workers.bench.httpfloor import main

    main()
