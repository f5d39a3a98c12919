"""Guards on the documentation: the references in docs/reference/ are what the code generates today
(`make docs`), the README stays a front page, every relative link in the docs leads somewhere; and the
migrated schema matches the models."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The generator is a script (it reads the CLI and the routes from above; nothing in the code imports it).
_spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
assert _spec and _spec.loader
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return reference.references()


@pytest.mark.parametrize("name", ["cli.md", "settings.md", "api.md", "metrics.md", "openapi.json"])
def test_each_reference_is_current(generated, name):
    path = str(reference.REFERENCE_DIR / name)
    committed = (ROOT / path).read_text() if (ROOT / path).exists() else ""
    assert committed == generated[path], f"{path} is stale: run `make docs`"


def test_the_references_do_not_depend_on_the_environment(generated, monkeypatch, tmp_path):
    """Another machine's settings, terminal width and working directory give the same files."""
    monkeypatch.setenv("LANNER_BIND", "10.9.8.7:9999")
    monkeypatch.setenv("LANNER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.chdir(tmp_path)
    assert reference.references() == generated
    assert list(tmp_path.iterdir()) == []


def test_the_references_name_no_path_of_this_machine(generated):
    # A clone elsewhere (CI's) has another checkout and venv: a default read from either at import
    # time (sys.prefix once was `lanner systemd render --venv`'s) would make the files stale there.
    import sys

    for path, text in generated.items():
        for local in (str(ROOT), sys.prefix, str(Path.home())):
            assert local not in text, f"{path} names {local}"


def test_every_command_and_setting_is_in_the_references(generated):
    from settings import SETTINGS

    cli = generated[str(reference.REFERENCE_DIR / "cli.md")]
    settings = generated[str(reference.REFERENCE_DIR / "settings.md")]
    assert [path for path in reference.command_paths() if f"\n## {path}\n" not in cli] == []
    assert [s.env for s in SETTINGS if f"\n## {s.env}\n" not in settings] == []
    assert "lanner bench unique" in reference.command_paths()  # The lazily added scenarios too.


def test_every_metric_is_in_the_reference(generated):
    from models.ops.metrics import CATALOGUE

    metrics = generated[str(reference.REFERENCE_DIR / "metrics.md")]
    assert [m.name for m in CATALOGUE if f"\n## {m.name}\n" not in metrics] == []


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors in a Markdown file (a repeated heading gets -1, -2, ...)."""
    found: set[str] = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = reference.slug(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)))
            anchor, n = base, 0
            while anchor in found:
                n += 1
                anchor = f"{base}-{n}"
            found.add(anchor)
    return found


def test_every_relative_link_in_the_docs_leads_to_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for match in LINK.finditer(FENCE.sub("", doc.read_text())):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            if not path.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_migrated_schema_matches_the_models(db):
    from models.tables.account import ApiKey, AuditEntry, CampaignShare, User
    from models.tables.campaign import Campaign, Stream, StreamOffer
    from models.tables.click import Click
    from models.tables.columnset import ColumnSet, ReportMemory
    from models.tables.conversion import (
        Conversion,
        PostbackDelivery,
        PostbackLog,
        PostbackRefusal,
        PostbackTarget,
        StatusMap,
    )
    from models.tables.domain import CampaignDomain, Domain
    from models.tables.lander import Lander, StreamLander
    from models.tables.network import Network
    from models.tables.offer import Offer
    from models.tables.optimisation import Label, Rule, RuleAction
    from models.tables.source import TrafficSource

    models = (Campaign, Stream, StreamOffer, Offer, Click, Conversion, PostbackLog, StatusMap, PostbackTarget)
    models += (PostbackDelivery, PostbackRefusal, User, CampaignShare, ApiKey, AuditEntry, Network)
    models += (TrafficSource,)
    models += (Lander, StreamLander)
    models += (Domain, CampaignDomain)
    models += (Label, Rule, RuleAction)
    models += (ColumnSet, ReportMemory)
    for model in models:
        table = model._meta.table_name
        columns = {column.name for column in db.get_columns(table)}
        fields = {field.column_name for field in model._meta.sorted_fields}
        assert columns == fields, table
