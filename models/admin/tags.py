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
    return clean_tags(text.split(","))


def clean_tags(names: Iterable[str]) -> list[str]:
    """`names` as tags, in order, each once case-blind (spaces inside one collapsed, blank ones
    dropped); AdminError in one sentence for one too long, one with a comma (the editor's text could
    never say it back), or too many."""
    tags: list[str] = []
    for name in names:
        tag = tag_text(name)
        if not tag or tag.lower() in (t.lower() for t in tags):
            continue
        if "," in tag:
            raise AdminError(f"A tag cannot hold a comma; {tag!r} does.")
        if len(tag) > MAX_TAG:
            raise AdminError(f"A tag is at most {MAX_TAG} characters; {tag[:MAX_TAG]!r}… is longer.")
        tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise AdminError(f"A campaign takes at most {MAX_TAGS} tags.")
    return tags


def tag_text(text: str | None) -> str:
    """A tag as typed, its spaces collapsed ("" for none): what a filter by tag compares."""
    return " ".join((text or "").split())


def has_tag(tags: Iterable[str], tag: str) -> bool:
    """Whether `tags` hold `tag` (tag_text's), case-blind: the one test of every list's tag filter."""
    return tag.lower() in (name.lower() for name in tags)


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


def update_campaign_and_tags(
    db: Database, ref: str | int, tags: list[str] | None, *, actor: Principal = CLI, **changes
) -> Campaign:
    """update_campaign's `changes` and, unless None, `tags` (clean_tags's) in one transaction: a
    refusal of either leaves both as they were."""
    from models.admin.services import get_campaign, update_campaign

    with write_tx(db):
        if changes or tags is None:
            campaign = update_campaign(db, ref, actor=actor, **changes)
        else:
            campaign = get_campaign(db, ref)
        if tags is not None:
            set_campaign_tags(db, campaign, tags, actor=actor)
    return campaign


def add_campaign_tags(
    db: Database, campaign: Campaign, names: Iterable[str], *, actor: Principal = CLI
) -> list[str]:
    """Add `names` to the campaign's tags (one it has already, in any case, stays as spelled); returns
    its tags A to Z."""
    with write_tx(db):
        before = campaign_tags(db, [campaign.id]).get(campaign.id, [])
        tags = clean_tags([*before, *names])
        set_campaign_tags(db, campaign, tags, actor=actor)
    return sorted(tags, key=str.lower)


def remove_campaign_tags(
    db: Database, campaign: Campaign, names: Iterable[str], *, actor: Principal = CLI
) -> list[str]:
    """Take `names` (case-blind) off the campaign's tags; one it does not have is no error. Returns its
    tags A to Z."""
    gone = {tag_text(name).lower() for name in names}
    with write_tx(db):
        before = campaign_tags(db, [campaign.id]).get(campaign.id, [])
        tags = [tag for tag in before if tag.lower() not in gone]
        set_campaign_tags(db, campaign, tags, actor=actor)
    return tags


def tag_counts(tags: dict[int, list[str]]) -> list[tuple[str, int]]:
    """(tag, how many of the campaigns in `tags` carry it) A to Z; spellings differing in case are one
    tag, named as the first campaign spells it."""
    counts: dict[str, list] = {}
    for campaign_id in sorted(tags):
        for tag in tags[campaign_id]:
            counts.setdefault(tag.lower(), [tag, 0])[1] += 1
    return sorted(((name, count) for name, count in counts.values()), key=lambda item: item[0].lower())
