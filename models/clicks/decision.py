"""A click's decision: its subid, what the visitor gets (a 302, a redirect page, a page, a 404) and where.

The visitor's URL is the chosen offer's (or stream's, or campaign default's) template rendered with
the click's macro values; a click repeated within debounce gets its earlier decision back. A click
routed to a lander goes there instead: a remote lander's URL template rendered the same way (its
`{offer}` is the absolute URL of the click's LP click), a local one's folder on the tracker itself
(`/landers/<folder>/?subid=...`); the offer's URL is rendered at the LP click (`lp_location`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from models.clicks.record import LANDER_ID, LOCATION, OFFER_ID, STREAM_ID, SUBID, USER_AGENT
from models.routing.path import ANSWER_STEPS, bot_step
from models.routing.router import Route
from models.tables.click import SUB_ID_COLUMNS

if TYPE_CHECKING:
    from models.clicks.enrichment import Lookups
    from models.clicks.history import VisitorHistory
    from models.clicks.visit import Visit
    from models.clicks.visitors import RecentClick
    from models.routing.config import CampaignConfig, StreamConfig
    from models.routing.filters import FilterSubject
    from models.routing.macros import UrlTemplate

# What the visitor gets: a 302 (http), a page that redirects (meta, js), a page (html, blank), a 404.
ANSWERS = ("http", "meta", "js", "html", "blank", "not_found")


@dataclass(slots=True)
class Decision:
    subid: str
    answer: str  # One of ANSWERS.
    location: str | None  # The URL for http/meta/js answers.
    body: str  # The page for an html answer.
    campaign_id: int
    stream_id: int | None
    offer_id: int | None
    is_repeat: bool  # Debounced: the subid of a click stored moments ago.
    is_unique_global: bool
    is_unique_campaign: bool
    is_unique_stream: bool
    is_bot: bool = False
    route: str = ""
    lander_id: int | None = None  # Sent to this lander: the offer (offer_id None) comes at its LP click.


LP_CLICK_PATH = "/lp/click"  # The LP click's URL on the tracker (routes/click.py LpClickResource).


class MacroValues:
    """The values of a click's macros, computed only for the macros a template uses.

    PERF: a template names one to three macros; building all ~50 values per click cost ~8 µs.
    """

    __slots__ = ("subid", "route", "visit", "subject", "lookups")

    def __init__(self, subid: str, route: Route, visit: Visit, lookups: Lookups) -> None:
        self.subid, self.route, self.visit = subid, route, visit
        self.subject, self.lookups = lookups.subject, lookups

    def device(self) -> FilterSubject:
        return self.lookups.device()

    def get(self, name: str) -> str | None:
        getter = _MACRO_GETTERS.get(name)
        return getter(self) if getter is not None else None


def _sub_id_getter(index: int) -> Callable[[MacroValues], str]:
    return lambda values: values.visit.sub_ids[index]


_MACRO_GETTERS: dict[str, Callable[[MacroValues], str]] = {
    "subid": lambda v: v.subid,
    "campaign_id": lambda v: str(v.route.campaign.id),
    "campaign_name": lambda v: v.route.campaign.name,
    "stream_id": lambda v: str(v.route.stream.id) if v.route.stream else "",
    "offer_id": lambda v: str(v.route.offer.offer_id) if v.route.offer else "",
    "ip": lambda v: v.visit.ip,
    "user_agent": lambda v: v.visit.user_agent,
    "referrer": lambda v: v.visit.referrer,
    "source": lambda v: v.visit.source,
    "external_id": lambda v: v.visit.external_id,
    "keyword": lambda v: v.visit.keyword,
    "cost": lambda v: f"{v.visit.cost:g}" if v.visit.cost else "",
    "country": lambda v: v.subject.country,
    "region": lambda v: v.subject.region,
    "city": lambda v: v.subject.city,
    "device_type": lambda v: v.device().device_type,
    "os": lambda v: v.device().os,
    "browser": lambda v: v.device().browser,
    "language": lambda v: v.subject.languages[0] if v.subject.languages else "",
    "offer": lambda v: lp_click_url(v.visit, v.subid),
    # Macro names are the column names.
    **{column: _sub_id_getter(index) for index, column in enumerate(SUB_ID_COLUMNS)},
}


def lp_click_url(visit: Visit, subid: str) -> str:
    """The absolute URL of the click's LP click, on the host the click came in on (relative without one)."""
    path = f"{LP_CLICK_PATH}?subid={subid}"
    if not visit.host:
        return path
    return f"{'https' if visit.is_https else 'http'}://{visit.host}{path}"


def decide(route: Route, subid: str, visit: Visit, lookups: Lookups, now: float) -> Decision:
    """A new click's decision: the visitor's URL and answer, the route's summary.

    Its uniqueness flags are set when the click is appended (under the journal lock).
    """
    location = render_location(route, subid, visit, lookups, now)
    campaign, stream, offer = route.campaign, route.stream, route.offer
    answer, body = answer_for(campaign, stream, location)
    lander = route.lander
    # The decision path (models/routing/path.py): the route, a bot the click path checked, the answer.
    path = route.summary
    if lookups.bot_reason is not None:
        path = f"{path} {bot_step(lookups.bot_reason)}" if path else bot_step(lookups.bot_reason)
    path = f"{path} {ANSWER_STEPS[answer]}" if path else ANSWER_STEPS[answer]
    return Decision(
        subid,
        answer,
        location,
        body,
        campaign.id,
        stream.id if stream else None,
        offer.offer_id if offer else None,
        False,
        False,
        False,
        False,
        lookups.subject.is_bot,
        path,
        lander.lander_id if lander else None,
    )


def render_location(route: Route, subid: str, visit: Visit, lookups: Lookups, now: float) -> str | None:
    """The visitor's URL: the lander's, or the offer's, the stream's or the campaign default's
    template rendered."""
    campaign, stream, offer, lander = route.campaign, route.stream, route.offer, route.lander
    template: UrlTemplate | None
    if lander is not None:
        if lander.template is None:  # Local: its files on the tracker (the cookie names the click too).
            return f"/landers/{lander.folder}/?subid={subid}"
        template = lander.template
    elif stream is None:
        template = campaign.default_redirect
    else:
        template = offer.template if offer else stream.redirect
    if template is None:
        return None
    values = MacroValues(subid, route, visit, lookups)
    return template.render(values, datetime.fromtimestamp(now, UTC) if template.uses_date else None)


def answer_for(
    campaign: CampaignConfig, stream: StreamConfig | None, location: str | None
) -> tuple[str, str]:
    """(answer, body): one of ANSWERS, and the page of an html answer."""
    if stream is None:
        if campaign.default_action == "blank":
            return "blank", ""
        return ("http", "") if location else ("not_found", "")
    if stream.action == "html":
        return "html", stream.payload
    if location is None:
        return "not_found", ""
    return stream.redirect_type, ""


FROM_HISTORY = object()  # repeat_of's `stored`: the history's own stored repeat.


def repeat_of(
    campaign: CampaignConfig,
    held: Sequence[RecentClick],
    read_record: Callable[[RecentClick], list | None],
    history: VisitorHistory,
    user_agent: str,
    debounce_since: int,
    visit: Visit,
    lookups: Lookups,
    now: float,
    stored: tuple | None | object = FROM_HISTORY,
) -> Decision | None:
    """The earlier decision, when the same visitor clicked this campaign moments ago (debounce).

    `held`: the visitor's clicks the worker holds, oldest first, whose lines `read_record` reads
    back from the journal; `history.stored_repeat`: their click in the campaign that only the
    database has (models/clicks/history.py), asked of the database too when a held click's line
    is gone (its segment landed and was removed). `stored`: that click for a campaign other than
    the one the history was read for (the campaign a stream sent the click on to).
    """
    stored_repeat = history.stored_repeat if stored is FROM_HISTORY else cast("tuple | None", stored)
    unreadable = False
    for recent in reversed(held):
        if recent.created_at < debounce_since:
            break
        if recent.campaign_id != campaign.id:
            continue
        seen = read_record(recent)
        if seen is None:
            unreadable = True
        elif seen[USER_AGENT] == user_agent:
            return repeat_decision(
                campaign,
                seen[SUBID],
                seen[STREAM_ID],
                seen[OFFER_ID],
                seen[LOCATION] or None,
                seen[LANDER_ID],
            )
    if unreadable and stored_repeat is None:
        stored_repeat = history.landed_repeat(debounce_since, campaign.id, user_agent)
    if stored_repeat is not None:
        subid, stream_id, offer_id, _, lander_id = stored_repeat
        stream = campaign.streams.get(stream_id) if stream_id is not None else None
        if stream_id is not None and stream is None:
            return None  # The stream is gone: route afresh as a new click.
        if (
            lander_id is not None and stream is not None
        ):  # Sent to a lander: there again (its LP click may have landed since).
            lander = next((x for x in stream.landers if x.lander_id == lander_id), None)
            if lander is None:
                return None  # The lander is no longer the stream's: route afresh as a new click.
            route = Route(campaign, stream, None, [], lander)
        else:
            route = Route(campaign, stream, stream.offer(offer_id) if stream is not None else None)
        location = render_location(route, subid, visit, lookups, now)
        return repeat_decision(campaign, subid, stream_id, offer_id, location, lander_id)
    return None


def repeat_decision(
    campaign: CampaignConfig,
    subid: str,
    stream_id: int | None,
    offer_id: int | None,
    location: str | None,
    lander_id: int | None = None,
) -> Decision:
    """The earlier click's decision again (its subid and Location), marked as a repeat."""
    stream = campaign.streams.get(stream_id) if stream_id is not None else None
    answer, body = answer_for(campaign, stream, location)
    return Decision(
        subid,
        answer,
        location,
        body,
        campaign.id,
        stream_id,
        offer_id,
        True,
        False,
        False,
        False,
        lander_id=lander_id,
    )
