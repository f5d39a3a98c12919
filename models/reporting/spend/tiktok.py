"""TikTok's reporting API: an advertiser's daily spend per ad (or ad group), read page by page.

https://business-api.tiktok.com/portal/docs?id=1740302848100353 (Reporting, "Create a synchronous
report"): GET /open_api/v1.3/report/integrated/get/ with the Access-Token header, advertiser_id,
report_type=BASIC, data_level=AUCTION_AD (or AUCTION_ADGROUP), dimensions ["stat_time_day", "ad_id"]
(or "adgroup_id"), metrics ["spend", "campaign_id", "adgroup_id", "currency"] (the ids and currency are
attribute metrics of an ad-level report), start_date / end_date (the advertiser's days), page and
page_size (at most 1,000). Every answer is HTTP 200 with {"code", "message", "request_id", "data"}: a
non-zero code is an error (40001 / 40105 a bad token, 40002 a bad parameter, 40100 too many requests);
data holds "list" (each row's "dimensions" and "metrics", all strings) and "page_info" (page,
page_size, total_number, total_page).
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

NAME = "tiktok"
LABEL = "TikTok"
CREDENTIALS = ("advertiser_id", "access_token", "level")
REQUIRED = ("advertiser_id", "access_token")
SECRETS = ("access_token",)
LEVELS = ("ad", "adgroup")
PAGE_SIZE = 1000


def check(credentials: dict[str, str]) -> str:
    if not credentials.get("advertiser_id", "").isdigit():
        return "The TikTok advertiser_id is the advertiser's number, such as 7012345678901234567."
    if credentials.get("level", "ad") not in LEVELS:
        return f"The TikTok level is one of {', '.join(LEVELS)}."
    return ""


def url(credentials: dict[str, str], since: str, until: str, base_url: str, page: int) -> str:
    level = credentials.get("level") or "ad"
    metrics = ["spend", "campaign_id", "currency"] + (["adgroup_id"] if level == "ad" else [])
    query = {
        "advertiser_id": credentials["advertiser_id"],
        "report_type": "BASIC",
        "data_level": "AUCTION_AD" if level == "ad" else "AUCTION_ADGROUP",
        "dimensions": json.dumps(["stat_time_day", f"{level}_id"]),
        "metrics": json.dumps(metrics),
        "start_date": since,
        "end_date": until,
        "page": str(page),
        "page_size": str(PAGE_SIZE),
    }
    return f"{base_url}/open_api/v1.3/report/integrated/get/?{urllib.parse.urlencode(query)}"


def fetch(credentials: dict[str, str], since: str, until: str, base_url: str, get: Get) -> list[SpendRow]:
    headers = {"Access-Token": credentials["access_token"]}
    level = credentials.get("level") or "ad"
    rows: list[SpendRow] = []
    for page in range(1, MAX_PAGES + 1):
        reply = get(url(credentials, since, until, base_url, page), headers)
        if reply.code is None:
            raise no_answer(LABEL, reply)
        try:
            payload = json.loads(reply.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict) or reply.code != 200:
            raise SpendError(
                f"TikTok answered {reply.code} with an unexpected body: {answer_text(reply.body, 200)}",
                reply.retry_after,
            )
        if payload.get("code") != 0:
            said = str(payload.get("message", ""))[:300]
            raise SpendError(f"TikTok refused the report: {said} (code {payload.get('code')}).")
        data = payload.get("data")
        items = data.get("list") if isinstance(data, dict) else None
        info = data.get("page_info") if isinstance(data, dict) else None
        if not isinstance(items, list) or not isinstance(info, dict):
            raise SpendError(f"TikTok answered a report without its list: {answer_text(reply.body, 200)}")
        rows.extend(_row(item, level) for item in items)
        total_pages = info.get("total_page")
        if not isinstance(total_pages, int) or page >= total_pages:
            return rows
    raise SpendError(f"TikTok named more than {MAX_PAGES:,} pages; the next run tries again.")


def _row(item: object, level: str) -> SpendRow:
    dimensions = item.get("dimensions") if isinstance(item, dict) else None
    metrics = item.get("metrics") if isinstance(item, dict) else None
    if not isinstance(dimensions, dict) or not isinstance(metrics, dict):
        raise SpendError(
            "TikTok answered a row without its dimensions and metrics; the next run tries again."
        )
    day, spend = day_of(dimensions.get("stat_time_day")), amount(metrics.get("spend"))
    finest = text_id(dimensions.get(f"{level}_id"))
    coarser = ("adgroup_id", "campaign_id") if level == "ad" else ("campaign_id",)
    ids = (finest, *(text_id(metrics.get(key)) for key in coarser))
    if not day or spend is None or not all(ids):
        shown = answer_text(json.dumps(item).encode(), 160)
        raise SpendError(f"TikTok answered a row without its day, spend or ids: {shown}")
    currency = metrics.get("currency")
    return SpendRow(day, ids, finest, spend, currency.upper() if isinstance(currency, str) else "")
