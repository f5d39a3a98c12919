"""A campaign URL's routing, simulated: what `lanner simulate` prints and the panel's simulate form shows.

The URL is parsed as the edge parses it (routes/click.py visit_from_url), the campaign's traffic source
parameters are applied as the click path applies them, and the click pipeline runs with dry_run
(models/clicks/tracker.py), so nothing is stored.
"""

from __future__ import annotations

from typing import Any

from models.errors import LannerError
from models.routing.trace import simulation_data
from routes.click import visit_from_url, with_source_slots


class NoActiveCampaign(LannerError):
    """The URL's alias names no active campaign; `alias` is the one it names."""

    def __init__(self, alias: str) -> None:
        super().__init__(f"No active campaign has the alias {alias!r}.")
        self.alias = alias


def simulate_url(
    tracker,
    url: str,
    *,
    sub_id_aliases: dict[str, int] | None,
    max_click_cost: float,
    ip: str,
    user_agent: str = "",
    referrer: str = "",
    language: str = "",
    method: str = "GET",
    headers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The routing trace (models/routing/trace.py simulation_data) of a click on `url` (/alias?params).

    Raises ValueError with one sentence for an unusable URL, IP, method or header, and NoActiveCampaign
    when the alias names no active campaign."""
    alias, visit = visit_from_url(
        url,
        ip=ip,
        user_agent=user_agent,
        referrer=referrer,
        language=language,
        method=method,
        headers=headers,
        sub_id_aliases=sub_id_aliases,
        max_click_cost=max_click_cost,
    )
    # The campaigns as the database has them now: the panel's tracker is kept between simulations,
    # and a buyer simulates the campaign he has just edited (one indexed read when nothing changed).
    tracker.refresh()
    campaign = tracker.campaign(alias)
    if campaign is None:
        raise NoActiveCampaign(alias)
    visit = with_source_slots(visit, campaign.source_slots)
    return simulation_data(tracker.simulate(campaign, visit))
