"""PropellerAds' advertiser statistics (SSP API v5): the spend of each campaign in each zone each day.

PropellerAds documents its API only on a Swagger page (https://ssp-api.propellerads.com/v5/docs/) that no
stored source holds: the request and answer below are what third-party code shows, not a citable
document (docs/platforms.md, "The PropellerAds contract", names each source):
- the server https://ssp-api.propellerads.com/v5, a Bearer token from the account's Profile page, and the
  path /adv/statistics: the top of PropellerAds' own OpenAPI file (SSP API 5.0), copied in
  github.com/pavelraiden/propellerads-api-encyclopedia data/api_specs.yaml;
- GET with `group_by[]` (`date_time`, `campaign_id`, ...) and day_from / day_to as "YYYY-MM-DD hh:mm:ss",
  answered {"items": [rows]}, each row keyed by its groups (`date_time`) with `spent`: a script reading
  it (found by the code search; it names no repository);
- `spent` as a row's spend: a Chrome extension summing `item.spent` over the answer (idem).
So a row's spend is read from `spent` (not `money`, which no source shows) and its day from `date_time`,
and the rows are taken from `items` or from a bare list (the extension's POST answer). The spend is in
USD (PropellerAds bills in dollars). A refusal is any other status, its {"message": ...} said; a 429 or
503 with Retry-After is waited out (models/reporting/spend/sync.py).
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
        ("group_by[]", "date_time"),
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
    items = payload.get("items") if isinstance(payload, dict) and reply.code == 200 else payload
    if reply.code != 200 or not isinstance(items, list):
        message = payload.get("message") if isinstance(payload, dict) else None
        said = str(message)[:300] if message else f"an unexpected body: {answer_text(reply.body, 200)}"
        raise SpendError(f"PropellerAds answered {reply.code}: {said}", reply.retry_after)
    return [_row(item) for item in items]


def _row(item: object) -> SpendRow:
    if not isinstance(item, dict):
        raise SpendError("PropellerAds answered a row that is not an object; the next run tries again.")
    day, spend = day_of(item.get("date_time")), amount(item.get("spent"))
    campaign, zone = text_id(item.get("campaign_id")), text_id(item.get("zone_id"))
    if not day or spend is None or not campaign or not zone:
        shown = answer_text(json.dumps(item).encode(), 160)
        raise SpendError(
            f"PropellerAds answered a row without its date_time, spent, campaign or zone: {shown}"
        )
    return SpendRow(day, (campaign,), zone, spend, CURRENCY)
