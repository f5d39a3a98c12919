"""Campaigns, offers and networks as plain fields: what `lanner campaign|offer|network list|show` prints
and the admin API answers."""

from __future__ import annotations

from typing import Any


def campaign_fields(campaign, tags: list[str] | None = None) -> dict[str, Any]:
    """A campaign as the CLI and the API show it; `tags`: its tags when the caller fetched a list's
    at once (models/admin/tags.py), else they are looked up."""
    if tags is None:
        from models.admin.tags import campaign_tags

        tags = (
            campaign_tags(campaign._meta.database, [campaign.id]).get(campaign.id, []) if campaign.id else []
        )
    return {
        "id": campaign.id,
        "alias": campaign.alias,
        "name": campaign.name,
        "status": campaign.status,
        "rotation": campaign.rotation,
        "uniqueness_hours": campaign.uniqueness_hours,
        "timezone": campaign.timezone,
        "bind_visitor": bool(campaign.bind_visitor),
        "default_action": campaign.default_action,
        "default_url": campaign.default_payload,
        "cost_model": campaign.cost_model,
        "cost_value": campaign.cost_value,
        "cost_currency": campaign.cost_currency,
        "owner_id": campaign.owner_id,  # The user who owns it (models/accounts/access.py); None: admins'.
        "token": campaign.token,  # Its Click API token (/click_api/v3); `--new-token` rotates it.
        "tags": tags,  # Its groups, A to Z (models/admin/tags.py).
        **_urls(campaign),
    }


def _urls(campaign) -> dict[str, Any]:
    """Its URL (on its first domain, if it has any), its domains, and its source's URL."""
    from models.admin.domains import campaign_domains, campaign_url

    domains = campaign_domains(campaign.id) if campaign.id is not None else []
    source = _source(campaign)
    if domains:
        source["source_url"] = campaign_url(campaign, source["source_url"])
    return {
        "url": campaign_url(campaign) if domains else f"/{campaign.alias}",
        "domains": [domain.name for domain in domains],
        **source,
    }


def _source(campaign) -> dict[str, Any]:
    """Its traffic source, and the URL with the source's placeholders the network is given."""
    from models.admin.sources import source_of
    from models.routing.sources import campaign_url, loads

    source = source_of(campaign)
    if source is None:
        return {"source": None, "source_url": f"/{campaign.alias}"}
    return {"source": source.name, "source_url": campaign_url(campaign.alias, loads(source.parameters))}


def offer_fields(offer) -> dict[str, Any]:
    return {
        "id": offer.id,
        "name": offer.name,
        "status": offer.status,
        "payout": offer.payout,
        "currency": offer.currency,
        "daily_cap": offer.daily_cap,
        "total_cap": offer.total_cap,
        "timezone": offer.timezone,
        "network_id": offer.network_id,  # Its affiliate network (network_fields); None: none.
        "url": offer.url,
    }


def network_fields(network) -> dict[str, Any]:
    return {
        "id": network.id,
        "name": network.name,
        "alias": network.alias,
        "status": network.status,
        "subid_macro": network.subid_macro,
        "payout_macro": network.payout_macro,
        "status_macro": network.status_macro,
        "tid_macro": network.tid_macro,
        "currency_macro": network.currency_macro,
        "offer_params": network.offer_params,
        "notes": network.notes,
        "status_changes": network.status_changes,
        "rebills": network.rebills,
    }
