"""Campaign tags: free names grouping campaigns ("push", "tier 1"), many to a campaign, set together
from a comma-separated text, as the editor's settings take them. The campaign list shows them and
filters by one; a user is only ever shown the tags of the campaigns they see.

Tags compare case-blind within a campaign (the first spelling given is kept); setting them is audited
as a change of the campaign's `tags`.
"""

from __future__ import annotations

from collections.abc import Iterable

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminError
from models.store.database import write_tx
from models.tables.campaign import Campaign, CampaignTag

MAX_TAG = 40
MAX_TAGS = 20  # On one campaign.


def parse_tags(text: str) -> list[str]:
    """The tags a comma-separated text names, in order, each once (spaces inside one collapsed);
    AdminError in one sentence for one too long or too many."""
    tags: list[str] = []
    for part in text.split(","):
        tag = " ".join(part.split())
        if not tag or tag.lower() in (t.lower() for t in tags):
            continue
        if len(tag) > MAX_TAG:
            raise AdminError(f"A tag is at most {MAX_TAG} characters; {tag[:MAX_TAG]!r}… is longer.")
        tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise AdminError(f"A campaign takes at most {MAX_TAGS} tags.")
    return tags


def campaign_tags(db: Database, campaign_ids: Iterable[int] | None = None) -> dict[int, list[str]]:
    """Campaign id -> its tags A to Z, of `campaign_ids` (None: of every campaign)."""
    query = CampaignTag.select(CampaignTag.campaign_id, CampaignTag.tag)
    if campaign_ids is not None:
        ids = sorted(set(campaign_ids))
        if not ids:
            return {}
        query = query.where(CampaignTag.campaign_id.in_(ids))
    tags: dict[int, list[str]] = {}
    for link in query.order_by(CampaignTag.campaign_id, CampaignTag.tag):
        tags.setdefault(link.campaign_id, []).append(link.tag)
    for names in tags.values():
        names.sort(key=str.lower)
    return tags


def set_campaign_tags(db: Database, campaign: Campaign, tags: list[str], *, actor: Principal = CLI) -> bool:
    """Make `tags` (parse_tags's) the campaign's tags; returns whether they changed."""
    with write_tx(db):
        before = sorted(campaign_tags(db, [campaign.id]).get(campaign.id, []), key=str.lower)
        after = sorted(tags, key=str.lower)
        if before == after:
            return False
        CampaignTag.delete().where(CampaignTag.campaign_id == campaign.id).execute()
        for tag in tags:
            CampaignTag.create(campaign=campaign.id, tag=tag)
        record_change(db, actor, "campaign", campaign.id, "update", {"tags": before}, {"tags": after})
    return True
