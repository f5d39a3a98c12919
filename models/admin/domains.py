"""Domains: add, change, list and remove the host names campaigns are served on, park a campaign at a
domain's root, restrict a campaign to some domains. The library the CLI, the admin API and the panel
call; certificates are workers/ops/certs.py's.

Every change runs in one transaction that writes its audit entry (entity `domain`) and bumps
`config_version`: web workers reload the domain map with the campaigns (models/routing/domains.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from peewee import Database, IntegrityError

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.services import AdminConflict, AdminError, AdminNotFound, get_campaign
from models.choices import DOMAIN_STATUSES
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Campaign
from models.tables.domain import CampaignDomain, Domain

# A DNS name: labels of letters, digits and hyphens (not at either end), at least two labels, 253 at most.
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
DOMAIN_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})+$")


def _now() -> int:
    return int(time.time() * 1000)


def check_name(name: str) -> str:
    """A domain as the table keeps it (lowercased, no trailing dot), or AdminError in one sentence."""
    cleaned = name.strip().lower().rstrip(".")
    if len(cleaned) > 253 or not DOMAIN_NAME.match(cleaned) or cleaned.replace(".", "").isdigit():
        raise AdminError(f"{name.strip()!r} is not a domain name such as track.example.com.")
    return cleaned


def domain_fields(domain: Domain, campaigns: dict[int, str] | None = None) -> dict[str, Any]:
    """A domain as the CLI prints it and the admin API answers it."""
    alias = None
    if domain.root_campaign_id is not None:
        alias = (campaigns or {}).get(domain.root_campaign_id)
        if alias is None:
            found = Campaign.get_or_none(Campaign.id == domain.root_campaign_id)
            alias = found.alias if found else None
    return {
        "id": domain.id,
        "name": domain.name,
        "status": domain.status,
        "root_campaign": alias,
        "https": bool(domain.is_https),
        "redirect_http": bool(domain.redirect_http),
        "cert_state": domain.cert_state,
        "cert_expires_at": domain.cert_expires_at,
        "cert_expires": _utc(domain.cert_expires_at),
        "cert_error": domain.cert_error,
        "url": base_url(domain),
    }


def _utc(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M") if ms else ""


def base_url(domain: Domain) -> str:
    """The domain's root URL: https once it has a certificate."""
    scheme = "https" if domain.is_https and domain.cert_state == "valid" else "http"
    return f"{scheme}://{domain.name}/"


def get_domain(db: Database, ref: str | int) -> Domain:
    """A domain by name (any case) or id."""
    ref = str(ref).strip()
    domain = Domain.get_or_none(Domain.name == ref.lower().rstrip("."))
    if domain is None and ref.isascii() and ref.isdigit() and int(ref) < 2**63:
        domain = Domain.get_or_none(Domain.id == int(ref))
    if domain is None:
        raise AdminNotFound(f"There is no domain {ref!r}.")
    return domain


def list_domains(db: Database, *, include_archived: bool = False) -> list[Domain]:
    query = Domain.select().order_by(Domain.name)
    if not include_archived:
        query = query.where(Domain.status == "active")
    return list(query)


def campaign_aliases(db: Database) -> dict[int, str]:
    """Campaign id -> alias, for listing many domains with their parked campaign."""
    return dict(Campaign.select(Campaign.id, Campaign.alias).tuples())  # type: ignore[arg-type]  # .tuples(): stubs say models.


def _root_campaign(db: Database, ref: str | None) -> int | None:
    if ref is None or ref == "":
        return None
    campaign = get_campaign(db, ref)
    if campaign.status == "archived":
        raise AdminError(f"Campaign {campaign.alias!r} is archived; a domain cannot park it.")
    return campaign.id


def _audit(db: Database, actor: Principal, domain: Domain, action: str, before: dict | None) -> None:
    after = None if action == "remove" else dict(domain.__data__)
    record_change(db, actor, "domain", domain.id, action, before, after)
    MetaStore(db.connection()).bump_config_version()


def create_domain(
    db: Database,
    name: str,
    *,
    campaign: str | None = None,
    is_https: bool = True,
    redirect_http: bool = False,
    actor: Principal = CLI,
) -> Domain:
    """A domain (no certificate yet: workers/ops/certs.py gets it); `campaign` is parked at its root."""
    fields = {
        "name": check_name(name),
        "root_campaign_id": _root_campaign(db, campaign),
        "is_https": int(is_https),
        "redirect_http": int(redirect_http and is_https),
    }
    with write_tx(db):
        try:
            domain = Domain.create(**fields)
        except IntegrityError:
            raise AdminConflict(f"The domain {fields['name']!r} already exists.") from None
        _audit(db, actor, domain, "create", None)
    return domain


def update_domain(
    db: Database,
    ref: str | int,
    *,
    campaign: str | None = None,
    is_https: bool | None = None,
    redirect_http: bool | None = None,
    status: str | None = None,
    actor: Principal = CLI,
) -> Domain:
    """Change a domain; None leaves a field as it is (`campaign=""` parks nothing)."""
    with write_tx(db):
        domain = get_domain(db, ref)
        before = dict(domain.__data__)
        if campaign is not None:
            domain.root_campaign_id = _root_campaign(db, campaign)
        if is_https is not None:
            domain.is_https = int(is_https)
        if redirect_http is not None:
            domain.redirect_http = int(redirect_http)
        if not domain.is_https:
            domain.redirect_http = 0  # Nowhere to redirect to.
        if status is not None:
            if status not in DOMAIN_STATUSES:
                raise AdminError(f"A domain's status is one of {', '.join(DOMAIN_STATUSES)}, not {status!r}.")
            domain.status = status
        domain.updated_at = _now()
        domain.save()
        _audit(db, actor, domain, "update", before)
    return domain


def record_certificate(
    db: Database, ref: str | int, *, expires_at: int | None, error: str = "", actor: Principal = CLI
) -> Domain:
    """What certbot got for the domain: a certificate valid until `expires_at` (UTC ms), or `error`."""
    with write_tx(db):
        domain = get_domain(db, ref)
        before = dict(domain.__data__)
        if error:
            domain.cert_error = error[-2000:]
            # A certificate got earlier stays in use (nginx still has it) until it expires.
            if domain.cert_state != "valid":
                domain.cert_state = "failed"
        else:
            domain.cert_state, domain.cert_expires_at, domain.cert_error = "valid", expires_at, ""
        domain.updated_at = _now()
        domain.save()
        _audit(db, actor, domain, "certificate", before)
    return domain


def remove_domain(db: Database, ref: str | int, *, actor: Principal = CLI) -> Domain:
    """Delete a domain and the campaigns' links to it (clicks keep the host they came by)."""
    with write_tx(db):
        domain = get_domain(db, ref)
        before = dict(domain.__data__)
        CampaignDomain.delete().where(CampaignDomain.domain_id == domain.id).execute()
        domain.delete_instance()
        _audit(db, actor, domain, "remove", before)
    return domain


def set_campaign_domains(
    db: Database, campaign_ref: str | int, names: Iterable[str], *, actor: Principal = CLI
) -> list[Domain]:
    """Serve a campaign only on these domains, the first being its shown URL's; none: on every domain."""
    with write_tx(db):
        campaign = get_campaign(db, campaign_ref)
        domains = [get_domain(db, name) for name in dict.fromkeys(names)]
        before = {"domains": [d.name for d in campaign_domains(campaign.id)]}
        CampaignDomain.delete().where(CampaignDomain.campaign_id == campaign.id).execute()
        for position, domain in enumerate(domains):
            CampaignDomain.create(campaign_id=campaign.id, domain_id=domain.id, position=position)
        after = {"domains": [d.name for d in domains]}
        record_change(db, actor, "campaign_domain", campaign.id, "update", before, after)
        MetaStore(db.connection()).bump_config_version()
    return domains


def campaign_domains(campaign_id: int) -> list[Domain]:
    """The domains a campaign is restricted to, the first first; empty: it answers on every domain."""
    return list(
        Domain.select()
        .join(CampaignDomain)
        .where(CampaignDomain.campaign_id == campaign_id)
        .order_by(CampaignDomain.position, Domain.id)
    )


def campaign_url(campaign: Campaign, path: str | None = None) -> str:
    """A campaign's URL as shown: on its first domain (https once that has a certificate), else the
    path alone (`/alias`, on whatever host the tracker is reached by)."""
    path = path or f"/{campaign.alias}"
    domains = campaign_domains(campaign.id)
    return base_url(domains[0]).rstrip("/") + path if domains else path
