"""PropellerAds' advertiser statistics (SSP API v5): the spend of each campaign in each zone each day.

https://ssp-api.propellerads.com/v5/docs/ (Advertiser API v5, "statistics"): GET /v5/adv/statistics with
a Bearer token (the API token of the account's profile), `group_by[]` = date, campaign_id, zone_id and
the period as day_from / day_to ("YYYY-MM-DD hh:mm:ss"). The answer is a JSON list of rows, one per
group, each with its date, campaign_id, zone_id and `money` (what was spent, in the account's currency:
USD, PropellerAds bills in dollars). A refusal is 401 (a bad token) or 403 with {"message": ...}, 422
with {"errors": ...} for a bad parameter, 429 with Retry-After when called too often.
"""

from __future__ import annotations

import json
import urllib.parse

from models.conversions.platforms.events import answer_text
from models.reporting.spend.fetch import Get, SpendError, SpendRow, amount, day_of, no_answer, text_id

NAME = "propellerads"
LABEL = "PropellerAds"
CREDENTIALS = ("api_token",)
REQUIRED = CREDENTIALS
SECRETS = ("api_token",)
CURRENCY = "USD"


def check(credentials: dict[str, str]) -> str:
    return ""


def url(since: str, until: str, base_url: str) -> str:
    query = [
        ("group_by[]", "date"),
        ("group_by[]", "campaign_id"),
        ("group_by[]", "zone_id"),
        ("day_from", f"{since} 00:00:00"),
        ("day_to", f"{until} 23:59:59"),
    ]
    return f"{base_url}/v5/adv/statistics?{urllib.parse.urlencode(query)}"


def fetch(credentials: dict[str, str], since: str, until: str, base_url: str, get: Get) -> list[SpendRow]:
    reply = get(url(since, until, base_url), {"Authorization": f"Bearer {credentials['api_token']}"})
    if reply.code is None:
        raise no_answer(LABEL, reply)
    try:
        payload = json.loads(reply.body)
    except ValueError:
        payload = None
    if reply.code != 200 or not isinstance(payload, list):
        message = payload.get("message") if isinstance(payload, dict) else None
        said = str(message)[:300] if message else f"an unexpected body: {answer_text(reply.body, 200)}"
        raise SpendError(f"PropellerAds answered {reply.code}: {said}", reply.retry_after)
    return [_row(item) for item in payload]


def _row(item: object) -> SpendRow:
    if not isinstance(item, dict):
        raise SpendError("PropellerAds answered a row that is not an object; the next run tries again.")
    day, spend = day_of(item.get("date")), amount(item.get("money"))
    campaign, zone = text_id(item.get("campaign_id")), text_id(item.get("zone_id"))
    if not day or spend is None or not campaign or not zone:
        shown = answer_text(json.dumps(item).encode(), 160)
        raise SpendError(f"PropellerAds answered a row without its date, money, campaign or zone: {shown}")
    return SpendRow(day, (campaign,), zone, spend, CURRENCY)
