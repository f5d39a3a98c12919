"""Rebuild tests/fixtures/device_detector/sample.jsonl.gz from a matomo/device-detector checkout.

The sample keeps each fixture's User-Agent and device type (nothing else) for the five device types the
tracker scores against (desktop, smartphone, tablet, tv, console) and phablets and feature phones beside
them, drawn at random with a fixed seed, at most QUOTA rows per type. Entries that device-detector types
from Client Hints headers are left out: the tracker reads only the User-Agent. Needs PyYAML (not a
Lanner dependency; `pip install pyyaml` in a scratch environment).

    python scripts/device_detector_sample.py \\
        /path/to/device-detector [tests/fixtures/device_detector/sample.jsonl.gz]
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import yaml

QUOTA = {"desktop": 400, "smartphone": 700, "tablet": 600, "tv": 600, "console": 100, "phablet": 75}
QUOTA["feature phone"] = 75
SEED = 18
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests/fixtures/device_detector/sample.jsonl.gz"


def fixtures(checkout: Path) -> list[dict]:
    """Every fixture entry of Tests/fixtures/*.yml with a User-Agent, a device type and no headers."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = []
    for path in sorted((checkout / "Tests" / "fixtures").glob("*.yml")):
        for entry in yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or []:
            if not isinstance(entry, dict) or "user_agent" not in entry or entry.get("headers"):
                continue
            device = entry.get("device")
            device_type = device.get("type") if isinstance(device, dict) else None
            if device_type in QUOTA:
                entries.append(
                    {"user_agent": str(entry["user_agent"]), "type": device_type, "file": path.stem}
                )
    return entries


def sample(entries: list[dict]) -> list[dict]:
    by_type: dict[str, list[dict]] = {device_type: [] for device_type in QUOTA}
    seen: set[str] = set()
    for entry in entries:
        if entry["user_agent"] not in seen:
            seen.add(entry["user_agent"])
            by_type[entry["type"]].append(entry)
    rng = random.Random(SEED)
    rows = []
    for device_type, quota in QUOTA.items():
        group = by_type[device_type]
        rng.shuffle(group)
        rows += group[:quota]
    return sorted(rows, key=lambda row: (row["type"], row["user_agent"]))


def main(checkout: Path, out: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rows = sample(fixtures(checkout))
    header = {
        "source": "https://github.com/matomo-org/device-detector Tests/fixtures/*.yml",
        "commit": commit,
        "license": "LGPL-3.0-or-later",
        "fields": ["user_agent", "type", "file"],
    }
    with gzip.GzipFile(out, "wb", mtime=0) as raw:
        raw.write((json.dumps(header) + "\n").encode())
        for row in rows:
            raw.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    print(f"{len(rows)} rows from {commit or 'an unknown commit'} -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT)
