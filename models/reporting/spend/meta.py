"""Meta's ad insights: an ad account's daily spend per ad (or ad set), read page by page.

https://developers.facebook.com/docs/marketing-api/insights/ (and .../reference/ad-account/insights/)
GET {graph}/{version}/act_{ad account id}/insights with level=ad (or adset), time_increment=1 (a row a
day), time_range={"since","until"} (the account's days), fields spend, campaign_id, adset_id, ad_id,
date_start, account_currency. The answer is {"data": [...], "paging": {"cursors": {"before", "after"},
"next": URL}}: another page exists while `next` is there, and is asked for with after=<cursor>. `spend`
is a decimal string in the account's currency. An error is {"error": {"message", "type", "code",
"fbtrace_id"}}: code 190 a bad or expired token, 100 an invalid parameter, 4, 17, 80000 rate limits.
The token goes in the Authorization header (the Graph API takes an OAuth bearer token), not the URL,
so the URL can be logged.
"""

from __future__ import annotations

import json
import urllib.parse

from models.conversions.platforms.events import answer_text
from models.reporting.spend.fetch import (
    MAX_PAGES,
    Get,
    SpendError,
    SpendRow,
    amount,
    day_of,
    no_answer,
    text_id,
)

NAME = "meta"
LABEL = "Meta"
API_VERSION = "v21.0"
CREDENTIALS = ("ad_account_id", "access_token", "level")
REQUIRED = ("ad_account_id", "access_token")
SECRETS = ("access_token",)
LEVELS = ("ad", "adset")  # What a row is of, and so what a click's parameter holds.
PAGE_SIZE = 500
FIELDS = "spend,campaign_id,adset_id,ad_id,date_start,account_currency"


def check(credentials: dict[str, str]) -> str:
    """Why these credentials cannot be used ('' if they can)."""
    account = credentials.get("ad_account_id", "").removeprefix("act_")
    if not account.isdigit():
        return "The Meta ad_account_id is the ad account's number, such as act_1234567890."
    if credentials.get("level", "ad") not in LEVELS:
        return f"The Meta level is one of {', '.join(LEVELS)}."
    return ""


def url(credentials: dict[str, str], since: str, until: str, base_url: str, after: str = "") -> str:
    account = credentials["ad_account_id"].removeprefix("act_")
    query = {
        "level": credentials.get("level") or "ad",
        "time_increment": "1",
        "time_range": json.dumps({"since": since, "until": until}, separators=(",", ":")),
        "fields": FIELDS,
        "limit": str(PAGE_SIZE),
    }
    if after:
        query["after"] = after
    return f"{base_url}/{API_VERSION}/act_{account}/insights?{urllib.parse.urlencode(query)}"


def fetch(credentials: dict[str, str], since: str, until: str, base_url: str, get: Get) -> list[SpendRow]:
    """Every row from `since` to `until` (the account's days, inclusive); SpendError if any page fails."""
    headers = {"Authorization": f"Bearer {credentials['access_token']}"}
    level = credentials.get("level") or "ad"
    rows: list[SpendRow] = []
    after = ""
    for _ in range(MAX_PAGES):
        reply = get(url(credentials, since, until, base_url, after), headers)
        if reply.code is None:
            raise no_answer(LABEL, reply)
        payload = _json(reply.body)
        if reply.code != 200 or not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise _refusal(reply.code, payload, reply.body, reply.retry_after)
        rows.extend(_row(item, level) for item in payload["data"])
        paging = payload.get("paging")
        paging = paging if isinstance(paging, dict) else {}
        cursors = paging.get("cursors")
        cursors = cursors if isinstance(cursors, dict) else {}
        after = text_id(cursors.get("after"))
        if not paging.get("next"):
            return rows
        if not after:
            raise SpendError("Meta named a next page without its cursor; the next run tries again.")
    raise SpendError(f"Meta kept naming a next page past {MAX_PAGES:,} pages; the next run tries again.")


def _json(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _refusal(code: int, payload: object, body: bytes, retry_after: float | None) -> SpendError:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        text = f"Meta answered {code}: {str(error.get('message', ''))[:300]} (code {error.get('code', '?')})."
        return SpendError(text, retry_after)
    return SpendError(f"Meta answered {code} with an unexpected body: {answer_text(body, 200)}", retry_after)


def _row(item: object, level: str) -> SpendRow:
    if not isinstance(item, dict):
        raise SpendError("Meta answered a row that is not an object; the next run tries again.")
    day, spend = day_of(item.get("date_start")), amount(item.get("spend", "0"))
    ids = tuple(text_id(item.get(key)) for key in ("ad_id", "adset_id", "campaign_id"))
    if level == "adset":
        ids = ids[1:]
    if not day or spend is None or not all(ids):
        shown = answer_text(json.dumps(item).encode(), 160)
        raise SpendError(f"Meta answered a row without its date, spend or ids: {shown}")
    currency = item.get("account_currency")
    return SpendRow(day, ids, ids[0], spend, currency.upper() if isinstance(currency, str) else "")
