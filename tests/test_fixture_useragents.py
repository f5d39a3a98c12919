"""OS and browser families against ua-parser/uap-core's own test cases (a committed copy, see
tests/fixtures/uap_core/README.md): Lanner's DeviceInfo.os and .browser are uap-core's family names, "Other"
answered as ""."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

from models.lookups.useragent import UserAgentParser

FAMILIES = Path(__file__).resolve().parent / "fixtures" / "uap_core" / "families.jsonl.gz"

# (uap-core file, User-Agent, expected family, Lanner's) for every case Lanner answers otherwise, measured on
# the committed copy. Empty: all 2,107 agree.
KNOWN_MISSES: list[tuple[str, str, str, str]] = []


def load() -> tuple[dict, list[dict]]:
    lines = gzip.decompress(FAMILIES.read_bytes()).decode("utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def test_the_copy_is_what_its_readme_says():
    header, rows = load()
    assert (
        header["license"] == "Apache-2.0" and header["commit"] == "e3c5e634bee0b14f1a129c991483910739ad9f6c"
    )
    assert collections.Counter(row["file"] for row in rows) == {
        "tests/test_ua.yaml": 1601,
        "tests/test_os.yaml": 483,
        "test_resources/additional_os_tests.yaml": 23,
    }


def test_os_and_browser_families_match_uap_core():
    _header, rows = load()
    parser = UserAgentParser(cache_size=10_000)
    agreed: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    misses = []
    for row in rows:
        expected = "" if row["family"] == "Other" else row["family"]
        got = getattr(parser.parse(row["user_agent"]), row["field"])
        total[row["field"]] += 1
        if got == expected:
            agreed[row["field"]] += 1
        else:
            misses.append((row["file"], row["user_agent"], expected, got))
    for field in ("browser", "os"):
        print(f"{field:8} {agreed[field]:5}/{total[field]:5} match uap-core's family")
    print(f"all      {sum(agreed.values()):5}/{len(rows):5}")
    for miss in misses:
        print("miss", miss)
    assert len(rows) == 2107
    assert misses == KNOWN_MISSES
