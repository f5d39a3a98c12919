"""A stored click's decision path in words, for the click log, the Click API log and `lanner click show`.

The path is what happened to the click, as the router and the flusher recorded it (models/routing/path.py):
the streams it was tried against with the filter that decided each, a cap reached, how the stream and the
offer were picked, the lander, the bot verdict, and what the visitor got. Only the words come from today's
config: the names of the streams, offers, landers and campaigns, the text of a stream's filters and caps
(a filter is named by its place; a place the stream no longer has is called by its number). A click
stored before the path was kept says so ("not recorded") instead of re-evaluating today's filters.

Names are read for the clicks on the page only: one short query per kind however many exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from models.routing.filters import describe_filter
from models.routing.path import Step, origin_of, read_path
from models.tables.campaign import Campaign, Stream
from models.tables.lander import Lander
from models.tables.offer import Offer

NOT_RECORDED = "not recorded (the click was stored before Lanner kept its decision path)"
ARROW = " → "
PASSED, FAILED = "✓", "✗"


@dataclass(frozen=True)
class StreamWords:
    name: str  # "stream 'Mobile'", "fallback stream 'Rest'", "stream #12 (deleted)"
    filters: tuple[str, ...] = ()
    caps: str = ""


@dataclass
class PathNames:
    """The names a page of paths needs, by id (campaigns by alias: a hop names its target's alias)."""

    streams: dict[int, StreamWords] = field(default_factory=dict)
    offers: dict[int, str] = field(default_factory=dict)
    landers: dict[int, str] = field(default_factory=dict)
    # Where an offer's or a remote lander's URL goes today: a click keeps no origin of its own for them.
    origins: dict[tuple[str, int], str] = field(default_factory=dict)
    campaigns: dict[str, str] = field(default_factory=dict)


def path_names(clicks: Iterable[dict[str, Any]]) -> PathNames:
    """The names of every stream, offer, lander and campaign the clicks' paths and rows mention."""
    streams: set[int] = set()
    offers: set[int] = set()
    landers: set[int] = set()
    aliases: set[str] = set()
    for click in clicks:
        for step in read_path(click.get("route") or "") or ():
            if step.kind == "stream":
                streams.add(step.number or 0)
            elif step.kind == "offer":
                offers.add(step.number or 0)
            elif step.kind == "lander":
                landers.add(step.number or 0)
            elif step.kind == "campaign":
                aliases.add(step.text)
        if click.get("offer_id"):  # The offer a lander's LP click chose.
            offers.add(click["offer_id"])
    names = PathNames()
    if streams:
        query = Stream.select(
            Stream.id,
            Stream.name,
            Stream.type,
            Stream.filters,
            Stream.daily_cap,
            Stream.total_cap,
        ).where(Stream.id.in_(sorted(streams)))
        for row in query:
            names.streams[row.id] = StreamWords(
                _stream_name(row.id, row.name, row.type), _filter_words(row.filters), _cap_words(row)
            )
    if offers:
        offer_rows = Offer.select(Offer.id, Offer.name, Offer.url).where(Offer.id.in_(sorted(offers)))
        for offer in offer_rows:
            names.offers[offer.id] = offer.name or f"#{offer.id}"
            names.origins["offer", offer.id] = origin_of(offer.url or "")
    if landers:
        lander_rows = Lander.select(Lander.id, Lander.name, Lander.url).where(Lander.id.in_(sorted(landers)))
        for lander in lander_rows:
            names.landers[lander.id] = lander.name or f"#{lander.id}"
            names.origins["lander", lander.id] = origin_of(lander.url or "")  # A local one's: ''.
    if aliases:
        campaign_rows = Campaign.select(Campaign.alias, Campaign.name).where(
            Campaign.alias.in_(sorted(aliases))
        )
        names.campaigns = {row.alias: row.name for row in campaign_rows}
    return names


def with_paths(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` (stored clicks) with `path`: each one's decision path in words."""
    names = path_names(rows)
    for row in rows:
        row["path"] = describe_path(row, names)
    return rows


def describe_path(click: dict[str, Any], names: PathNames) -> str:
    """The click's decision path in words, or NOT_RECORDED."""
    steps = read_path(click.get("route") or "")
    if steps is None:
        return NOT_RECORDED
    words = [f"bot: {step.text}" for step in steps if step.kind == "bot"]
    chosen = False  # A stream (or the bound one) taken in the campaign the click is in.
    target = ""  # The origin of the offer's or lander's URL, today's.
    origin = next((step.text for step in steps if step.kind == "origin"), "")
    for step in steps:
        kind = step.kind
        if kind in ("offer", "lander") and not origin:
            target = names.origins.get((kind, step.number or 0), "")
        if kind == "stream":
            words.append(_stream_step(step, names))
            chosen = chosen or step.verdict in ("matched", "bound")
        elif kind == "campaign":
            words.append(f"sent to campaign {_quoted(names.campaigns.get(step.text, step.text))}")
            chosen = False
        elif kind == "pick":
            words.append(_PICK_WORDS[step.text])
        elif kind == "offer":
            words.append(f"offer {_offer(step.number, names)}")
        elif kind == "lander":
            lander = names.landers.get(step.number or 0, f"#{step.number} (deleted)")
            words.append(f"lander {_quoted(lander)}")
        elif kind == "answer":
            answer = _answer_words(step.text, origin or target)
            if step.text == "html" or chosen:
                words.append(answer)
            else:
                words.append(f"no stream took it → default action {answer}")
            if click.get("lander_id") is not None:
                words.append(_lp_click_words(click, names))
    return ARROW.join(words)


_PICK_WORDS = {
    "weight": "weighted pick",
    "bandit": "bandit pick",
    "unvisited": "among offers not seen yet",
    "fallback": "fallback offer (the others capped)",
}


def _stream_step(step: Step, names: PathNames) -> str:
    words = names.streams.get(step.number or 0, StreamWords(f"stream #{step.number} (deleted)"))
    verdict, place, filters = step.verdict, step.filter, words.filters
    if verdict == "bound":
        return f"{words.name} again (bound visitor)"
    if verdict == "capped":
        return f"{words.name}: cap {_quoted(words.caps or 'cap')} reached"
    if verdict == "offers capped":
        return f"{words.name}: every offer capped"
    if verdict == "matched":
        if place is not None:  # Any one must pass: this one did.
            return f"{words.name} (filters: {_filter(filters, place)} {PASSED}, any one of {len(filters)})"
        if not filters:
            return f"{words.name} (no filters)"
        return f"{words.name} (filters: {', '.join(f'{f} {PASSED}' for f in filters)})"
    if place is not None:  # All must pass: the ones before it did, this one failed.
        shown = [f"{_filter(filters, i)} {PASSED}" for i in range(place)]
        shown.append(f"{_filter(filters, place)} {FAILED}")
        return f"{words.name} did not match (filters: {', '.join(shown)})"
    failed = ", ".join(f"{f} {FAILED}" for f in filters)
    return f"{words.name} did not match (none of its filters passed{': ' + failed if failed else ''})"


def _answer_words(answer: str, origin: str) -> str:
    target = f"{origin}/…" if origin else "a page of this tracker"
    return {
        "http": f"302 {target}",
        "meta": f"meta refresh {target}",
        "js": f"JS redirect {target}",
        "html": "the stream's HTML page",
        "blank": "blank page",
        "not_found": "404",
    }[answer]


def _lp_click_words(click: dict[str, Any], names: PathNames) -> str:
    if click.get("lp_clicked_at") is None:
        return "no LP click yet"
    offer = click.get("offer_id")
    return f"LP click → offer {_offer(offer, names)}" if offer else "LP click → no open offer (404)"


def _offer(offer_id: int | None, names: PathNames) -> str:
    return _quoted(names.offers.get(offer_id or 0, f"#{offer_id} (deleted)"))


def _filter(filters: tuple[str, ...], place: int) -> str:
    return filters[place] if place < len(filters) else f"filter {place + 1} (since removed)"


def _quoted(name: str) -> str:
    return f"'{name}'"


def _stream_name(stream_id: int, name: str, kind: str) -> str:
    shown = _quoted(name) if name else f"#{stream_id}"
    return f"stream {shown}" if kind == "regular" else f"{kind} stream {shown}"


def _filter_words(specs: str) -> tuple[str, ...]:
    try:
        return tuple(describe_filter(spec) for spec in json.loads(specs or "[]"))
    except (ValueError, KeyError, TypeError):
        return ()


def _cap_words(stream: Any) -> str:
    caps = []
    if stream.daily_cap is not None:
        caps.append(f"daily {stream.daily_cap}")
    if stream.total_cap is not None:
        caps.append(f"total {stream.total_cap}")
    return " / ".join(caps)
