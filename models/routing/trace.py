"""Routing traces for people: `lanner simulate` (a visit that is not stored) and `lanner click show`.

A simulation runs the click pipeline itself with `dry_run` (models/clicks/tracker.py). A stored click
keeps its routing summary (`route`, written and read in models/routing/router.py) and what the
filters looked at (country, device, language, …); showing it re-evaluates the named streams' current
filters against those stored values, so each verdict comes with the value it saw. The ISP, connection
type and carrier are not stored: they are looked up again in the current files.

Some inputs are not stored at all: query parameters other than the sub ids (`param.NAME`), whether the
visitor had been seen in a stream other than the one it landed in (`unique=stream`) or in a campaign it
was sent on from (`unique=campaign`), and the full address once it may be kept truncated (`ip`, with
LANNER_ANONYMIZE_IP or after `lanner privacy`). Re-evaluating those against a guess could contradict the
stored decision, so such a filter's verdict is None ("not stored") with the reason in place of the value.
"""

from __future__ import annotations

from typing import Any

from models.clicks.privacy import anonymized_ip
from models.clicks.tracker import Simulation
from models.lookups.geo import UNKNOWN_NETWORK, NetworkInfo
from models.routing.config import CampaignConfig
from models.routing.filters import FilterSubject
from models.routing.router import TraceEntry, read_summary

NOT_STORED = "not stored"


def trace_rows(trace: list[TraceEntry]) -> list[dict[str, Any]]:
    """One row per stream considered, with its filters' verdicts."""
    rows = []
    for entry in trace:
        stream = entry.stream
        rows.append(
            {
                "campaign": entry.campaign,
                "stream": stream.id,
                "name": stream.name,
                "type": stream.type,
                "verdict": entry.verdict,
                "filters": [
                    {"filter": description, "passed": passed, "saw": seen}
                    for description, passed, seen in entry.filters
                ],
            }
        )
    return rows


def subject_row(subject: FilterSubject) -> dict[str, Any]:
    return {
        "ip": subject.ip,
        "country": subject.country or "unknown",
        "region": subject.region or "unknown",
        "city": subject.city or "unknown",
        "device_type": subject.device_type,
        "os": subject.os or "unknown",
        "browser": subject.browser or "unknown",
        "languages": ",".join(subject.languages) or "unknown",
        "is_bot": subject.is_bot,
    }


def simulation_data(simulation: Simulation) -> dict[str, Any]:
    decision = simulation.decision
    return {
        "visitor": {**subject_row(simulation.subject), "bot_reason": simulation.bot_reason},
        "streams": trace_rows(simulation.trace),
        "decision": {
            "campaign_id": decision.campaign_id,
            "stream_id": decision.stream_id,
            "offer_id": decision.offer_id,
            "answer": decision.answer,
            "location": decision.location,
            "is_repeat": decision.is_repeat,
            "is_unique_campaign": decision.is_unique_campaign,
            "route": decision.route,
            # The lander step: the click goes to this lander; its offer is chosen at its LP click.
            "lander_id": decision.lander_id,
            "lander_name": simulation.lander.name if simulation.lander else None,
            "lander_kind": simulation.lander.kind if simulation.lander else None,
        },
    }


def stored_subject(click: dict[str, Any], network: NetworkInfo = UNKNOWN_NETWORK) -> FilterSubject:
    """What the filters saw for a stored click (query parameters other than sub_ids are not stored)."""
    sub_ids = [click.get(f"sub_id_{slot}", "") for slot in range(1, 31)]
    stream_id = click.get("stream_id")
    return FilterSubject(
        ip=click["ip"],
        user_agent=click["user_agent"],
        referrer=click["referrer"],
        keyword=click["keyword"],
        params={},
        sub_ids=sub_ids,
        languages=(click["language"],) if click["language"] else (),
        country=click["country"],
        region=click["region"],
        city=click["city"],
        device_type=click["device_type"],
        os=click["os"],
        browser=click["browser"],
        is_bot=bool(click["is_bot"]),
        now=click["created_at"] / 1000,
        is_unique_campaign=bool(click["is_unique_campaign"]),
        seen_in_stream=lambda sid: sid == stream_id and not click["is_unique_stream"],
        isp=network.isp,
        connection=network.connection,
        carrier=network.carrier,
    )


def stored_trace(
    click: dict[str, Any], campaigns: dict[int, CampaignConfig], network: NetworkInfo = UNKNOWN_NETWORK
) -> list[TraceEntry]:
    """The streams named in a stored click's route, with their current filters re-evaluated."""
    subject = stored_subject(click, network)
    # Stream id -> (its campaign's alias, the stream).
    streams = {sid: (c.alias, stream) for c in campaigns.values() for sid, stream in c.streams.items()}
    campaign_of = {sid: c.id for c in campaigns.values() for sid in c.streams}
    trace = []
    for stream_id, verdict in read_summary(click["route"]):
        if stream_id not in streams:
            continue  # Deleted or paused since.
        entry = TraceEntry(*streams[stream_id], verdict)
        if verdict != "bound":
            filters = entry.stream.filters
            filters.matches(subject, entry.stream.id, entry.filters)
            # `matches` appends one row per spec, in the specs' order.
            for index, spec in enumerate(filters.specs):
                reason = unstored_input(spec, click, stream_id, campaign_of[stream_id])
                if reason is not None:
                    entry.filters[index] = (entry.filters[index][0], None, reason)
        trace.append(entry)
    return trace


def unstored_input(
    spec: dict[str, Any], click: dict[str, Any], stream_id: int, campaign_id: int
) -> str | None:
    """Why what a filter looked at for a stored click is not stored, or None when it is."""
    name = spec["name"]
    if name == "param":
        return f"{NOT_STORED}: query parameters other than sub ids are not kept"
    if name == "unique" and spec["scope"] == "stream" and stream_id != click["stream_id"]:
        return f"{NOT_STORED}: only the landing stream's uniqueness is kept"
    if name == "unique" and spec["scope"] == "campaign" and campaign_id != click["campaign_id"]:
        return f"{NOT_STORED}: only the landing campaign's uniqueness is kept"
    if name == "ip" and anonymized_ip(click["ip"]) == click["ip"]:
        return f"{NOT_STORED}: the address may be kept truncated"
    return None
