"""Domains as a web worker holds them: which hosts are the tracker's, the campaign each parks at `/`,
and the domains a campaign is restricted to. Loaded with the campaigns (models/clicks/tracker.py,
on a `config_version` change), so the click path pays one dict lookup for the Host.

With no domain at all the map is empty and every host answers as before: nothing is checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from models.tables.domain import CampaignDomain, Domain


@dataclass(frozen=True)
class DomainMap:
    roots: dict[str, int | None] = field(default_factory=dict)  # Host -> the campaign id parked at `/`.
    # Campaign id -> the hosts it answers on; a campaign not here answers on every domain.
    campaign_hosts: dict[int, frozenset[str]] = field(default_factory=dict)

    def allows(self, host: str, campaign_id: int, *, is_tracker_host: bool = False) -> bool:
        """A campaign URL on this host may run this campaign (always, while there is no domain). The
        tracker's own hosts (LANNER_TRACKER_HOSTS) answer as a domain that parks nothing."""
        if not self.roots:
            return True
        if is_tracker_host:
            return campaign_id not in self.campaign_hosts
        if host not in self.roots:
            return False
        hosts = self.campaign_hosts.get(campaign_id)
        return hosts is None or host in hosts


NO_DOMAINS = DomainMap()


def host_of(raw: str) -> str:
    """A Host header as the domain table spells it: lowercased, without the port or a trailing dot."""
    host = raw.strip().lower()
    if host.startswith("["):  # An IPv6 literal: never a domain; kept whole.
        return host.partition("]")[0] + "]"
    return host.partition(":")[0].rstrip(".")


def load_domains(db) -> DomainMap:
    """Every active domain and every campaign's domain list (called inside the tracker's read)."""
    roots = {d.name: d.root_campaign_id for d in Domain.select().where(Domain.status == "active")}
    if not roots:
        return NO_DOMAINS
    hosts: dict[int, set[str]] = {}
    query = (
        CampaignDomain.select(CampaignDomain.campaign_id, Domain.name)
        .join(Domain)
        .tuples()  # Archived domains too: a campaign restricted to one answers on none of them.
    )
    # .tuples(): peewee's stubs still say models.
    for campaign_id, name in cast("Iterable[tuple[int, str]]", query):
        hosts.setdefault(campaign_id, set()).add(name)
    return DomainMap(roots, {campaign_id: frozenset(names) for campaign_id, names in hosts.items()})
