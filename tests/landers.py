"""Landers for the lander-step tests, made with the models (the admin CLI/API for them is another
branch's): a campaign whose stream sends to weighted landers, its offers chosen at the LP click."""

from __future__ import annotations

from models.admin.services import create_campaign, create_offer, update_stream
from models.store.database import write_tx
from models.store.meta import MetaStore
from models.tables.campaign import Stream
from models.tables.lander import Lander, StreamLander


def add_landers(db, stream_id: int, landers: list[dict]) -> list[int]:
    """Landers (kind, url or folder, weight) attached to the stream; config_version bumped."""
    ids = []
    with write_tx(db):
        for n, spec in enumerate(landers):
            lander = Lander.create(
                name=spec.get("name", f"lander {stream_id}-{n}"),
                kind=spec.get("kind", "remote"),
                url=spec.get("url", ""),
                folder=spec.get("folder", ""),
            )
            StreamLander.create(stream=stream_id, lander=lander.id, weight=spec.get("weight", 100))
            ids.append(lander.id)
        MetaStore(db.connection()).bump_config_version()
    return ids


def lander_campaign(
    db,
    alias: str,
    landers: list[dict],
    *,
    offers: list[dict] | None = None,
    uniqueness_hours: float = 24.0,
) -> dict:
    """A campaign whose one stream sends to `landers`, its offers (url, weight, caps) behind them."""
    offers = offers or [{"url": "https://offer.example/o?click={subid}&c={country}&s1={sub_id_1}"}]
    made = [
        create_offer(
            db,
            f"{alias} offer {n}",
            spec["url"],
            daily_cap=spec.get("daily_cap"),
            total_cap=spec.get("total_cap"),
        )
        for n, spec in enumerate(offers)
    ]
    campaign = create_campaign(
        db, alias.title(), alias, offer_id=made[0].id, uniqueness_hours=uniqueness_hours
    )
    stream = Stream.get(Stream.campaign == campaign.id)
    if len(made) > 1:
        weights = [(o.id, spec.get("weight", 100)) for o, spec in zip(made, offers, strict=True)]
        update_stream(db, stream.id, offers=weights)
    lander_ids = add_landers(db, stream.id, landers)
    return {
        "campaign_id": campaign.id,
        "stream_id": stream.id,
        "offer_ids": [o.id for o in made],
        "lander_ids": lander_ids,
    }
