"""The objects the panel's later pages show, made once in the bench's database: a lander, a traffic
source with its spend connection, a network, a domain, an alert channel, a rule, a platform connection,
zone labels and a saved column set, all on the busiest campaign, so that each page (a list and its
object's page) is timed with something on it rather than empty.

Below panelclient.py's `prepare_panel` (which calls `make_panel_objects`); over the same services as the
CLI and the panel, so every object is one a user could have made. A second run finds them by name.
"""

from __future__ import annotations

from collections.abc import Callable

from peewee import Database

NAME = "Bench"  # Every object's name (or its prefix): found again by it on the next run.
SOURCE = "Bench Push"
ZONES = [str(zone) for zone in range(1000, 1040)]  # Generated clicks' sub_id_1 values (generate.py).


def _existing(model, field, name: str, make: Callable[[], object]) -> int:
    row = model.get_or_none(field == name)
    if row is None:
        make()
        row = model.get(field == name)
    return int(row.id)


def make_panel_objects(db: Database, settings, campaign_id: int, admin_id: int) -> dict[str, str]:
    """Make what is missing; answer the ids the paths name (`{lander}`, `{rule}`, ...)."""
    from models.admin.domains import create_domain
    from models.admin.landers import create_lander
    from models.admin.rows import get_campaign
    from models.admin.sources import create_source
    from models.alerts.channels import create_channel
    from models.alerts.senders import AlertConfig
    from models.conversions.networks import create_network
    from models.conversions.platforms.connections import create_connection
    from models.optimisation.labels import scope_of, set_labels
    from models.optimisation.rules import create_rule
    from models.reporting.columnpages import CAMPAIGNS
    from models.reporting.columnsets import save_set
    from models.reporting.spend.connections import create_spend_connection
    from models.tables.alerts import AlertChannel
    from models.tables.columnset import ColumnSet
    from models.tables.conversion import PlatformConnection
    from models.tables.domain import Domain
    from models.tables.lander import Lander
    from models.tables.network import Network
    from models.tables.optimisation import Rule
    from models.tables.source import TrafficSource
    from models.tables.spend import SpendConnection

    alias = get_campaign(db, campaign_id).alias
    ids = {
        "lander": _existing(
            Lander,
            Lander.name,
            f"{NAME} LP",
            lambda: create_lander(db, f"{NAME} LP", url="https://lp.example/b"),
        ),
        "source": _existing(
            TrafficSource,
            TrafficSource.name,
            SOURCE,
            lambda: create_source(db, SOURCE, "zoneid={zoneid}"),
        ),
        "network": _existing(
            Network,
            Network.name,
            f"{NAME} Net",
            lambda: create_network(db, f"{NAME} Net", subid_macro="{sub1}"),
        ),
        "domain": _existing(
            Domain, Domain.name, "bench.example", lambda: create_domain(db, "bench.example", campaign=alias)
        ),
        "channel": _existing(
            AlertChannel,
            AlertChannel.name,
            f"{NAME} hook",
            lambda: create_channel(
                db,
                f"{NAME} hook",
                "webhook",
                {"url": "https://hooks.example/bench", "signing_secret": "bench-signing-secret-0123456789"},
                config=AlertConfig.from_settings(settings),
            ),
        ),
    }
    ids["rule"] = _existing(
        Rule,
        Rule.name,
        f"{NAME} zones",
        lambda: create_rule(
            db,
            f"{NAME} zones",
            campaigns=[alias],
            dimension="sub_id_1",
            window="7d",
            conditions=["clicks >= 100 and conversions = 0"],
            action="notify",
            notify=f"{NAME} hook",
        ),
    )
    ids["platform"] = _existing(
        PlatformConnection,
        PlatformConnection.name,
        f"{NAME} pixel",
        lambda: create_connection(
            db,
            f"{NAME} pixel",
            "meta",
            campaign=alias,
            credentials={"pixel_id": "1", "access_token": "EAAB-bench-token-0123456789"},
        ),
    )
    ids["spend"] = _existing(
        SpendConnection,
        SpendConnection.name,
        f"{NAME} spend",
        lambda: create_spend_connection(
            db,
            f"{NAME} spend",
            "propellerads",
            source=SOURCE,
            credentials={"api_token": "bench-token-0123456789"},
            parameter="zoneid",
        ),
    )
    set_labels(db, scope_of(db, alias, None, "sub_id_1"), ZONES[:20], "blacklist")
    set_labels(db, scope_of(db, alias, None, "sub_id_1"), ZONES[20:], "whitelist")
    if ColumnSet.get_or_none((ColumnSet.user_id == admin_id) & (ColumnSet.name == f"{NAME} columns")) is None:
        save_set(
            db,
            admin_id,
            CAMPAIGNS,
            f"{NAME} columns",
            ["clicks", "conversions", "revenue"],
            hides_money=False,
        )
    return {key: str(value) for key, value in ids.items()}
