"""Guards: every setting and every CLI command is documented in the README; the schema matches the models."""

from __future__ import annotations

from pathlib import Path

import click

from cli import main
from settings import SETTINGS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def command_paths(group: click.Group, prefix: str = "lanner") -> list[str]:
    paths = []
    context = click.Context(group)
    for name in group.list_commands(context):  # Not `.commands`: `lanner bench` adds its scenarios lazily.
        command = group.get_command(context, name)
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, path))
        else:
            paths.append(path)
    return paths


def test_every_setting_is_in_the_readme():
    missing = [setting.env for setting in SETTINGS if f"`{setting.env}`" not in README]
    assert missing == []


def test_every_command_is_in_the_readme():
    missing = [path for path in command_paths(main) if path not in README and not _in_alternation(path)]
    assert missing == []


def _in_alternation(path: str) -> bool:
    """`lanner db migrate|status` documents both commands."""
    *group, leaf = path.split()
    prefix = " ".join(group) + " "
    for line in README.splitlines():
        start = line.find(prefix)
        while start != -1:
            word = line[start + len(prefix) :].split(" ")[0].split("`")[0]
            if leaf in word.split("|"):
                return True
            start = line.find(prefix, start + 1)
    return False


def test_migrated_schema_matches_the_models(db):
    from models.tables.account import ApiKey, AuditEntry, CampaignShare, User
    from models.tables.campaign import Campaign, Stream, StreamOffer
    from models.tables.click import Click
    from models.tables.conversion import (
        Conversion,
        PostbackDelivery,
        PostbackLog,
        PostbackRefusal,
        PostbackTarget,
        StatusMap,
    )
    from models.tables.lander import Lander, StreamLander
    from models.tables.network import Network
    from models.tables.offer import Offer
    from models.tables.domain import CampaignDomain, Domain
    from models.tables.source import TrafficSource

    models = (Campaign, Stream, StreamOffer, Offer, Click, Conversion, PostbackLog, StatusMap, PostbackTarget)
    models += (PostbackDelivery, PostbackRefusal, User, CampaignShare, ApiKey, AuditEntry, Network)
    models += (TrafficSource,)
    models += (Lander, StreamLander)
    models += (Domain, CampaignDomain)
    for model in models:
        table = model._meta.table_name
        columns = {column.name for column in db.get_columns(table)}
        fields = {field.column_name for field in model._meta.sorted_fields}
        assert columns == fields, table
