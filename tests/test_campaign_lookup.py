"""Finding a campaign by id or alias (models/admin/services.py get_campaign), the same on every backend."""

from __future__ import annotations


def test_an_alias_that_is_another_campaign_s_id_finds_the_campaign_with_that_alias(db):
    from models.admin.services import create_campaign, get_campaign

    first = create_campaign(db, "First", "first", offer_url="https://a.example/?s={subid}")
    second = create_campaign(db, "Second", str(first.id), offer_url="https://b.example/?s={subid}")
    assert get_campaign(db, str(first.id)).id == second.id  # The alias wins over the id.
    assert get_campaign(db, second.id).id == second.id
    assert get_campaign(db, "first").id == first.id
