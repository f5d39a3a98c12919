"""Config templates shipped in nginx/ and systemd/: `{{NAME}}` placeholders, filled strictly."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")


def render_template(relative_path: str, values: dict[str, str]) -> str:
    """The template with every placeholder replaced; a placeholder without a value is a KeyError."""
    text = (ROOT / relative_path).read_text()
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)
