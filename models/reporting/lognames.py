"""Names for the ids a log shows (the click and conversion logs: streams and offers), read for the ids
on the page only, so a log page costs one short query per kind however many streams and offers exist.

A stream without a name is called by its place (`#12`), as the editor lists it; an id whose row is
gone (a removed stream, a deleted offer) is named as such rather than left blank.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from models.tables.campaign import Campaign, Stream
from models.tables.conversion import Conversion
from models.tables.offer import Offer

KINDS = {"stream": Stream, "offer": Offer}
RANKED = {"campaign": Campaign, **KINDS}


def names_of(kind: str, ids: Iterable[int | None]) -> dict[int, str]:
    """Id -> the shown name of each of `ids` of `kind` (stream or offer)."""
    model = cast("Any", KINDS[kind])  # Stream or Offer: both have id and name.
    wanted = sorted({i for i in ids if i})
    names = {}
    if wanted:
        names = {row.id: row.name for row in model.select(model.id, model.name).where(model.id.in_(wanted))}
    return {i: (names[i] or f"#{i}") if i in names else f"#{i} (deleted)" for i in wanted}


def name_ids(rows: list[dict[str, Any]], kinds: Iterable[str] = ("stream", "offer")) -> list[dict[str, Any]]:
    """`rows` with `<kind>_name` beside each `<kind>_id` ('' where the id is none)."""
    for kind in kinds:
        names = names_of(kind, (row.get(f"{kind}_id") for row in rows))
        for row in rows:
            row[f"{kind}_name"] = names.get(row.get(f"{kind}_id") or 0, "")
    return rows


def name_ranks(kind: str) -> dict[int, int]:
    """Id -> its place among the names of every `kind` (campaign, stream or offer), by name regardless of
    case then id: what a log sorted by that column sorts by (models/reporting/logorder.py)."""
    model = cast("Any", RANKED[kind])
    named = [(row.name or f"#{row.id}", row.id) for row in model.select(model.id, model.name)]
    ordered = sorted(named, key=lambda pair: (pair[0].lower(), pair[1]))
    return {row_id: place for place, (_, row_id) in enumerate(ordered)}


def campaigns_of_conversions(ids: Iterable[int | None]) -> dict[int, int]:
    """Conversion id -> its campaign's id, for the ids on a page (an outbound postback's conversion)."""
    wanted = sorted({i for i in ids if i})
    if not wanted:
        return {}
    rows = Conversion.select(Conversion.id, Conversion.campaign_id).where(Conversion.id.in_(wanted))
    return {row.id: row.campaign_id for row in rows}
