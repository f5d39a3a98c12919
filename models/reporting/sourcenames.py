"""A traffic source's parameter names in reports: `-g zoneid`, `-f zoneid=123`.

A name is the sub_id slot its source stores it in, for the campaigns whose source defines it: the
report is narrowed to those campaigns (within any campaign filter it has), so a `zoneid` column
never holds another campaign's sub_id_1. Where those campaigns' sources store the name in different
slots the report is refused, in one sentence saying which: filter it to one source's campaigns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from models.errors import LannerError
from models.routing.sources import loads, slot_of
from models.tables.campaign import Campaign
from models.tables.source import TrafficSource


class SourceNameError(LannerError, ValueError):
    """A source parameter name a report cannot use; one sentence for the user."""


def source_parameter_names() -> list[str]:
    """Every traffic source's parameter names that fill a sub_id slot (the report builder offers them)."""
    names: dict[str, None] = {}
    for source in TrafficSource.select(TrafficSource.parameters).order_by(TrafficSource.id):
        names.update(dict.fromkeys(slot_of(loads(source.parameters))))
    return list(names)


def resolve_source_names(
    query, known: frozenset[str] | tuple[str, ...], campaign_ids: tuple[str, ...] | None
) -> tuple[Any, dict[str, str], list[str]]:
    """(the query with source names as sub_id_N and the campaign filter narrowed, sub_id_N -> name to
    label the columns with, notes). `campaign_ids`: the query's campaign filter as ids, or None."""
    names = [name for name in dict.fromkeys((*query.group_by, *query.filters)) if name not in known]
    if not names:
        return query, {}, []
    slots_by_source: dict[int | None, tuple[str, dict[str, int]]] = {
        s.id: (s.name, slot_of(loads(s.parameters))) for s in TrafficSource.select()
    }
    campaigns = Campaign.select(Campaign.id, Campaign.source_id).where(Campaign.source_id.is_null(False))
    if campaign_ids is not None:
        campaigns = campaigns.where(Campaign.id.in_([int(i) for i in campaign_ids]))
    scope: set[int] | None = None
    renames: dict[str, str] = {}
    for name in names:
        found: dict[int, str] = {}  # slot -> a source name storing `name` there
        ids = set()
        for campaign in campaigns:
            source_name, slots = slots_by_source.get(campaign.source_id, ("", {}))
            if name in slots:
                found.setdefault(slots[name], source_name)
                ids.add(campaign.id)
        if not found:
            if any(name in slots for _, slots in slots_by_source.values()):
                raise SourceNameError(
                    f"No campaign of the report uses a traffic source with a parameter {name!r}."
                )
            return query, {}, []  # Not a source's name either: the report's own check names it.
        if len(found) > 1:
            (a, a_source), (b, b_source) = sorted(found.items())[:2]
            raise SourceNameError(
                f"{name!r} is sub_id_{a} in traffic source {a_source!r} and sub_id_{b} in {b_source!r}: "
                "filter the report to one source's campaigns (campaign=...), "
                f"or use sub_id_{a} or sub_id_{b}."
            )
        renames[name] = f"sub_id_{next(iter(found))}"
        scope = ids if scope is None else scope & ids
    groups = [renames.get(name, name) for name in query.group_by]
    filtered = [renames.get(name, name) for name in query.filters]
    if len(set(groups)) < len(groups) or len(set(filtered)) < len(filtered):
        raise SourceNameError("A report names one sub_id slot twice (a source's name and its sub_id_N).")
    if not scope:
        raise SourceNameError(
            f"No campaign of the report uses a traffic source that defines all of {', '.join(names)}."
        )
    filters = {renames.get(name, name): values for name, values in query.filters.items()}
    filters["campaign"] = tuple(str(i) for i in sorted(scope))
    query = dataclasses.replace(
        query, group_by=tuple(renames.get(name, name) for name in query.group_by), filters=filters
    )
    note = (
        ", ".join(f"{name} is {slot}" for name, slot in renames.items())
        + f": the report covers the {len(scope)} campaign(s) whose traffic source defines "
        + ("it." if len(renames) == 1 else "them.")
    )
    return query, {slot: name for name, slot in renames.items()}, [note]
