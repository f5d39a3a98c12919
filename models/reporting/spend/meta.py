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

A window longer than ASYNC_AFTER_DAYS (a backfill) is asked for as an asynchronous report job, as Meta
advises for large requests (https://developers.facebook.com/docs/marketing-api/insights/best-practices/,
"async /insights"): POST {graph}/{version}/act_{id}/insights with the same parameters as a form answers
{"report_run_id": id}; GET {graph}/{version}/{report_run_id} answers the job (an AdReportRun: `async_status`
"Job Not Started", "Job Started", "Job Running", "Job Completed", "Job Failed" or "Job Skipped", and
`async_percent_completion`; the fields of Meta's own SDK's AdReportRun, facebook-nodejs-business-sdk
src/objects/ad-report-run.js, whose `getInsights` reads the `/insights` edge; Meta's changelog of
2026-01-08, "Enhanced Error Messaging for Ads Insights Async API", adds error_message to a failed one), and
GET {graph}/{version}/{report_run_id}/insights pages its rows as the synchronous call does. The job is
asked after waits growing from POLL_WAITS[0] to POLL_WAITS[-1] seconds, for POLL_SECONDS in all; a job
that fails, is skipped or is not done by then fails the run (the next run asks again).
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.parse
from collections.abc import Callable
from datetime import date

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
ASYNC_AFTER_DAYS = 7  # A longer window (a backfill) is read through a report job, not one request.
POLL_WAITS = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # Seconds between looks at a job, the last repeated.
POLL_SECONDS = 900.0  # A job not done in this fails the run; the next run asks again.
JOB_DONE = "Job Completed"
JOB_ENDED = ("Job Failed", "Job Skipped")


def check(credentials: dict[str, str]) -> str:
    """Why these credentials cannot be used ('' if they can)."""
    account = credentials.get("ad_account_id", "").removeprefix("act_")
    if not account.isdigit():
        return "The Meta ad_account_id is the ad account's number, such as act_1234567890."
    if credentials.get("level", "ad") not in LEVELS:
        return f"The Meta level is one of {', '.join(LEVELS)}."
    return ""


def params(credentials: dict[str, str], since: str, until: str) -> dict[str, str]:
    return {
        "level": credentials.get("level") or "ad",
        "time_increment": "1",
        "time_range": json.dumps({"since": since, "until": until}, separators=(",", ":")),
        "fields": FIELDS,
        "limit": str(PAGE_SIZE),
    }


def insights_path(credentials: dict[str, str], base_url: str) -> str:
    return f"{base_url}/{API_VERSION}/act_{credentials['ad_account_id'].removeprefix('act_')}/insights"


def url(credentials: dict[str, str], since: str, until: str, base_url: str, after: str = "") -> str:
    query = params(credentials, since, until)
    if after:
        query["after"] = after
    return f"{insights_path(credentials, base_url)}?{urllib.parse.urlencode(query)}"


def fetch(
    credentials: dict[str, str],
    since: str,
    until: str,
    base_url: str,
    get: Get,
    sleep: Callable[[float], None] = time.sleep,
) -> list[SpendRow]:
    """Every row from `since` to `until` (the account's days, inclusive); SpendError if any page fails.
    A window longer than ASYNC_AFTER_DAYS is read through a report job."""
    headers = {"Authorization": f"Bearer {credentials['access_token']}"}
    level = credentials.get("level") or "ad"
    days = (date.fromisoformat(until) - date.fromisoformat(since)).days + 1
    if days > ASYNC_AFTER_DAYS:
        run_id = _run_job(credentials, since, until, base_url, get, headers, sleep)

        def job_page(after: str) -> str:
            query = {"limit": str(PAGE_SIZE), **({"after": after} if after else {})}
            return f"{base_url}/{API_VERSION}/{run_id}/insights?{urllib.parse.urlencode(query)}"

        return _pages(job_page, headers, level, get)
    return _pages(lambda after: url(credentials, since, until, base_url, after), headers, level, get)


def _run_job(
    credentials: dict[str, str],
    since: str,
    until: str,
    base_url: str,
    get: Get,
    headers: dict[str, str],
    sleep: Callable[[float], None],
) -> str:
    """Start the window's report job and wait for it to complete; its report_run_id."""
    form = urllib.parse.urlencode(params(credentials, since, until)).encode()
    posted = headers | {"Content-Type": "application/x-www-form-urlencoded"}
    reply = get(insights_path(credentials, base_url), posted, method="POST", body=form)
    if reply.code is None:
        raise no_answer(LABEL, reply)
    payload = _json(reply.body)
    run_id = text_id(payload.get("report_run_id")) if isinstance(payload, dict) else ""
    if reply.code != 200 or not run_id.isdigit():
        raise _refusal(reply.code, payload, reply.body, reply.retry_after)
    waited = 0.0
    for wait in itertools.chain(POLL_WAITS, itertools.repeat(POLL_WAITS[-1])):
        reply = get(f"{base_url}/{API_VERSION}/{run_id}", headers)
        if reply.code is None:
            raise no_answer(LABEL, reply)
        payload = _json(reply.body)
        if reply.code != 200 or not isinstance(payload, dict) or "async_status" not in payload:
            raise _refusal(reply.code, payload, reply.body, reply.retry_after)
        status = payload["async_status"]
        if status == JOB_DONE:
            return run_id
        if status in JOB_ENDED:
            why = payload.get("error_message")
            said = f": {str(why)[:200]}" if why else ""
            raise SpendError(f"Meta's report job {run_id} ended {status!r}{said}; the next run asks again.")
        if waited + wait > POLL_SECONDS:
            done = payload.get("async_percent_completion", "?")
            raise SpendError(
                f"Meta's report job {run_id} was not done after {POLL_SECONDS / 60:.0f} min ({done} %); "
                "the next run asks again."
            )
        sleep(wait)
        waited += wait
    raise AssertionError("unreachable: the waits repeat")


def _pages(page_url: Callable[[str], str], headers: dict[str, str], level: str, get: Get) -> list[SpendRow]:
    """Every row of the pages `page_url(after)` names, cursor after cursor."""
    rows: list[SpendRow] = []
    after = ""
    for _ in range(MAX_PAGES):
        reply = get(page_url(after), headers)
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
