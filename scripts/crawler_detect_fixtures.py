"""Rebuild tests/fixtures/crawler_detect/ from a JayBizzle/Crawler-Detect checkout.

- crawlers.txt.gz: tests/data/user_agent/crawlers.txt, verbatim (one crawler User-Agent a line).
- sec_ch_ua_crawlers.txt, sec_ch_ua_devices.txt: tests/data/sec_ch_ua/*.txt, verbatim (Sec-CH-UA values).
- devices_sample.jsonl.gz: a sample of tests/data/user_agent/devices.txt (~165,000 browser and app
  User-Agents, 24 MB), one `{"line": its line number in devices.txt, "ua": ...}` a line after a header:
  every line Lanner's bot decision flags today (so the test names every false positive), every line in
  which a crawler or signature pattern, relaxed as the decision's prefilter relaxes them, appears anywhere
  (the near misses that only crawlerdetect's exclusions keep human, at most NEAR_QUOTA of them, drawn at
  random), and 1 in RANDOM_SHARE of the rest, drawn at random (seed 18). File order is kept.

Run from the repository root, with Lanner importable:

    python scripts/crawler_detect_fixtures.py /path/to/Crawler-Detect [tests/fixtures/crawler_detect]
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import re2
from crawlerdetect.providers.crawlers import data as CRAWLER_PATTERNS

from models.lookups import botsignatures
from models.lookups.bots import LINK_PREVIEW_PATTERNS, BotDetector, relaxed_pattern

SEED = 18
RANDOM_SHARE = 40
NEAR_QUOTA = 3000
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests/fixtures/crawler_detect"


def near_miss_pattern() -> re2._Regexp:
    """Every crawler, link-preview and signature pattern, relaxed, as one case-insensitive automaton."""
    options = re2.Options()
    options.case_sensitive = False
    options.never_capture = True
    options.log_errors = False
    signatures = [p for patterns in botsignatures.FAMILIES.values() for p in patterns]
    accepted = []
    for pattern in (*CRAWLER_PATTERNS, *LINK_PREVIEW_PATTERNS, *signatures):
        relaxed = relaxed_pattern(pattern)
        if relaxed is None:
            continue
        try:
            re2.compile(relaxed, options)
        except re2.error:
            continue
        accepted.append(relaxed)
    return re2.compile("|".join(f"(?:{p})" for p in accepted), options)


def sample_devices(lines: list[str]) -> tuple[list[dict], dict]:
    detector = BotDetector(cache_size=1)
    near = near_miss_pattern()
    rng = random.Random(SEED)
    flagged, near_misses, chosen = [], [], []
    for number, ua in enumerate(lines, start=1):
        if detector.reason(ua, "") is not None:
            flagged.append(number)
        elif near.search(ua) is not None:
            near_misses.append(number)
        elif rng.randrange(RANDOM_SHARE) == 0:
            chosen.append(number)
    near_kept = sorted(rng.sample(near_misses, min(NEAR_QUOTA, len(near_misses))))
    keep = sorted({*flagged, *near_kept, *chosen})
    counts = {
        "lines": len(lines),
        "flagged": len(flagged),
        "near_misses": len(near_misses),
        "near_misses_kept": len(near_kept),
        "random": len(chosen),
        "rows": len(keep),
    }
    return [{"line": number, "ua": lines[number - 1]} for number in keep], counts


def main(checkout: Path, out: Path) -> None:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    data = checkout / "tests" / "data"
    out.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out / "crawlers.txt.gz", "wb", mtime=0) as raw:
        raw.write((data / "user_agent" / "crawlers.txt").read_bytes())
    for name in ("crawlers", "devices"):
        shutil.copyfile(data / "sec_ch_ua" / f"{name}.txt", out / f"sec_ch_ua_{name}.txt")
    lines = (data / "user_agent" / "devices.txt").read_text(encoding="utf-8").splitlines()
    rows, counts = sample_devices(lines)
    header = {
        "source": "https://github.com/JayBizzle/Crawler-Detect tests/data/user_agent/devices.txt",
        "commit": commit,
        "license": "MIT",
        "fields": ["line", "ua"],
        "seed": SEED,
        "random_share": RANDOM_SHARE,
        "near_quota": NEAR_QUOTA,
        **counts,
    }
    with gzip.GzipFile(out / "devices_sample.jsonl.gz", "wb", mtime=0) as raw:
        raw.write((json.dumps(header) + "\n").encode())
        for row in rows:
            raw.write((json.dumps(row, ensure_ascii=False) + "\n").encode())
    print(json.dumps(header, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_OUT)
