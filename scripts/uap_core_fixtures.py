"""Rebuild tests/fixtures/uap_core/families.jsonl.gz from a ua-parser/uap-core checkout.

Keeps each test case's User-Agent and expected family (nothing else: versions are not Lanner's) from the
three files uap-core's own runners score families on: tests/test_ua.yaml (browser), tests/test_os.yaml and
test_resources/additional_os_tests.yaml (OS). Every entry is kept, in file order, duplicates included.
Needs PyYAML (not a Lanner dependency; `pip install pyyaml` in a scratch environment).

    python scripts/uap_core_fixtures.py /path/to/uap-core [tests/fixtures/uap_core/families.jsonl.gz]
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import yaml

# (file in uap-core, what its family names: the DeviceInfo field it is compared with)
FILES = (
    ("tests/test_ua.yaml", "browser"),
    ("tests/test_os.yaml", "os"),
    ("test_resources/additional_os_tests.yaml", "os"),
)
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests/fixtures/uap_core/families.jsonl.gz"


def rows(checkout: Path) -> list[dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    for name, field in FILES:
        document = yaml.load((checkout / name).read_text(encoding="utf-8"), Loader=loader)
        for case in document["test_cases"]:
            out.append(
                {
                    "file": name,
                    "field": field,
                    "user_agent": str(case["user_agent_string"]),
                    "family": str(case["family"]),
                }
            )
    return out


def main(checkout: Path, out: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    found = rows(checkout)
    header = {
        "source": "https://github.com/ua-parser/uap-core " + ", ".join(name for name, _ in FILES),
        "commit": commit,
        "license": "Apache-2.0",
        "fields": ["file", "field", "user_agent", "family"],
    }
    with gzip.GzipFile(out, "wb", mtime=0) as raw:
        raw.write((json.dumps(header) + "\n").encode())
        for row in found:
            raw.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    print(f"{len(found)} rows from {commit or 'an unknown commit'} -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT)
