"""A click's lookups: what filters and macros look at beyond the request (geo, device, bot).

Geo is looked up for every click (cached or ~1 µs), the ISP / connection-type files only for a
campaign that filters on them; the costly parts, the User-Agent parse and the
bot check, are done at most once and on the click path only when routing or a macro needs them;
the spool flusher does the rest for lines journaled with is_bot NOT_CHECKED. The bot signals of the
request besides its User-Agent and IP (HEAD, From, Sec-CH-UA...) are judged here, on every click that
has any (a cached lookup): the journal line carries only the User-Agent and the IP, so a click they
make a bot is journaled with is_bot 1, and the flusher's verdict on the rest is the same decision's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.clicks.record import NOT_CHECKED
from models.lookups.bots import BotDetector
from models.lookups.geo import UNKNOWN_GEO, GeoSource
from models.lookups.useragent import UNKNOWN_DEVICE, UserAgentParser, device_type
from models.routing.filters import FilterSubject, parse_accept_language

if TYPE_CHECKING:
    from models.clicks.visit import Visit
    from models.routing.config import CampaignConfig


class Lookups:
    """One click's lookups that cost time (bot signatures, User-Agent parsing): done at most once,
    and on the click path only when routing or a macro needs them (`Router.route`'s `prepare`)."""

    __slots__ = ("subject", "devices", "bots", "bot_reason", "is_bot_known", "geo")

    def __init__(
        self,
        subject: FilterSubject,
        devices: UserAgentParser,
        bots: BotDetector,
        geo: GeoSource | None = None,
        bot_signals: str = "",
    ) -> None:
        self.subject, self.devices, self.bots = subject, devices, bots
        self.geo = geo
        self.bot_reason: str | None = None
        self.is_bot_known = False
        if bot_signals:
            # BotDetector.reason's first step, taken now: the flusher will not see these signals.
            self.bot_reason = bots.signals_reason(bot_signals)
            if self.bot_reason is not None:
                subject.is_bot = self.is_bot_known = True

    def bot(self) -> None:
        if not self.is_bot_known:
            subject = self.subject
            self.bot_reason = self.bots.reason(subject.user_agent, subject.ip)
            subject.is_bot = self.bot_reason is not None
            self.is_bot_known = True

    def device(self) -> FilterSubject:
        subject = self.subject
        if not subject.device_type:
            self.bot()
            device = self.devices.parse(subject.user_agent) if subject.user_agent else UNKNOWN_DEVICE
            subject.device_type = device_type(device, subject.is_bot)
            subject.os, subject.browser = device.os, device.browser
        return subject

    def network(self) -> None:
        """ISP, connection type and carrier: a second file, looked up only when a campaign filters on them."""
        if self.geo is not None:
            subject = self.subject
            info = self.geo.lookup_network(subject.ip)
            subject.isp, subject.connection, subject.carrier = info.isp, info.connection, info.carrier

    def prepare(self, campaign: CampaignConfig) -> None:
        if campaign.needs_network:
            self.network()
        if campaign.needs_device:
            self.device()
        elif campaign.needs_bot:
            self.bot()

    @property
    def is_bot_field(self) -> int:
        """is_bot as journaled: 0/1, or NOT_CHECKED for the flusher to decide."""
        return int(self.subject.is_bot) if self.is_bot_known else NOT_CHECKED


def look_up(
    visit: Visit, geo: GeoSource | None, devices: UserAgentParser, bots: BotDetector, now: float
) -> Lookups:
    """What filters look at; the costly parts (bot, device) are filled in by Lookups when needed."""
    place = geo.lookup(visit.ip) if geo is not None else UNKNOWN_GEO
    subject = FilterSubject(
        ip=visit.ip,
        user_agent=visit.user_agent,
        referrer=visit.referrer,
        keyword=visit.keyword,
        params=visit.params,
        sub_ids=visit.sub_ids,
        languages=parse_accept_language(visit.accept_language) if visit.accept_language else (),
        country=place.country,
        region=place.region,
        city=place.city,
        device_type="",
        os="",
        browser="",
        is_bot=False,
        now=now,
        is_unique_campaign=True,
        seen_in_stream=lambda stream_id: False,
    )
    return Lookups(subject, devices, bots, geo, visit.bot_signals)


def stored_lookups(record: list, devices: UserAgentParser, bots: BotDetector, now: float) -> tuple[Visit, Lookups]:
    """(visit, lookups) of a click already made, from its record (models/clicks/record.py: a journal
    line's or its row's): what the LP click renders the offer's macros with. Its device is parsed here
    only if a macro asks and the flusher has not filled it in yet."""
    from models.clicks.record import CLICK_COLUMNS, IP, IS_BOT, USER_AGENT
    from models.clicks.visit import Visit
    from models.tables.click import SUB_ID_COLUMNS

    column = {name: record[position] for position, name in enumerate(CLICK_COLUMNS)}
    sub_ids = [column[name] or "" for name in SUB_ID_COLUMNS]
    visit = Visit(
        ip=record[IP],
        user_agent=record[USER_AGENT],
        referrer=column["referrer"],
        source=column["source"],
        external_id=column["external_id"],
        keyword=column["keyword"],
        cost=column["cost"] or 0.0,
        sub_ids=sub_ids,
    )
    subject = FilterSubject(
        ip=visit.ip,
        user_agent=visit.user_agent,
        referrer=visit.referrer,
        keyword=visit.keyword,
        params={},
        sub_ids=sub_ids,
        languages=(column["language"],) if column["language"] else (),
        country=column["country"],
        region=column["region"],
        city=column["city"],
        device_type=column["device_type"],
        os=column["os"],
        browser=column["browser"],
        is_bot=record[IS_BOT] == 1,
        now=now,
        is_unique_campaign=False,
        seen_in_stream=lambda stream_id: False,
    )
    lookups = Lookups(subject, devices, bots)
    lookups.is_bot_known = record[IS_BOT] != -1
    return visit, lookups
