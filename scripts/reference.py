"""Regenerate docs/reference/ (the CLI, settings and admin API references) from the code: `make docs`.

    .venv/bin/python scripts/reference.py

The generation itself is workers/ops/reference.py; tests/test_docs.py checks the files are current.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workers.ops.reference import write_references  # noqa: E402


def main() -> None:
    changed = write_references(ROOT)
    for name in changed:
        print(f"wrote {name}")
    if not changed:
        print("docs/reference/ is current")


if __name__ == "__main__":
    main()
