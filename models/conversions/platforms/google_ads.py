"""Google Ads offline click conversions: the upload request for a batch and how to read its answer.

https://developers.google.com/google-ads/api/rest/reference/rest/v17/customers/uploadClickConversions
POST {api}/v17/customers/{customer id}:uploadClickConversions with partialFailure true and
`conversions` (at most 2,000), each with gclid, conversionAction (a resource name),
conversionDateTime ("yyyy-mm-dd hh:mm:ss+00:00"), conversionValue and currencyCode; orderId carries
the event id so an upload repeated after a lost answer is refused as a duplicate, not counted twice.
Headers: the OAuth token (Authorization: Bearer), developer-token, and login-customer-id when the
account is reached through a manager account. With partial failure a row Google refuses comes back
as an error located at conversions[index] while the others are uploaded.
"""

from __future__ import annotations

import datetime
import json

from models.conversions.platforms.events import Answer, Connection, Event, Request, answer_text

NAME = "google_ads"
API_VERSION = "v17"
BATCH_LIMIT = 2000
MAX_AGE_SECONDS = 0  # Google keeps its own conversion window per action; it refuses rows, not batches.
CREDENTIALS = ("customer_id", "conversion_action", "developer_token", "oauth_token", "login_customer_id")
REQUIRED = ("customer_id", "conversion_action", "developer_token", "oauth_token")
SECRETS = ("developer_token", "oauth_token")
DEFAULT_EVENTS = {"sale": "Purchase"}
CLICK_ID = "gclid"


def customer_digits(value: str) -> str:
    return value.replace("-", "").strip()


def conversion_action(connection: Connection) -> str:
    action = connection.credentials["conversion_action"]
    if action.startswith("customers/"):
        return action
    return f"customers/{customer_digits(connection.credentials['customer_id'])}/conversionActions/{action}"


def date_time(unix_seconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(unix_seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S+00:00")


def unusable(event: Event) -> str:
    if not event.click_ids.get("gclid"):
        return "The click has no gclid: Google Ads cannot match the conversion, so it was not sent."
    return ""


def request(connection: Connection, events: list[Event], base_url: str, *, is_test: bool = False) -> Request:
    """The upload of a batch; a test is `validateOnly`: Google checks it and records nothing."""
    action = conversion_action(connection)
    body = {
        "conversions": [
            {
                "gclid": event.click_ids["gclid"],
                "conversionAction": action,
                "conversionDateTime": date_time(event.event_time),
                "conversionValue": round(event.value, 6),
                "currencyCode": event.currency,
                "orderId": event.event_id,
            }
            for event in events
        ],
        "partialFailure": True,
    }
    if is_test:
        body["validateOnly"] = True
    headers = {
        "Content-Type": "application/json",
        "Authorization": "Bearer " + connection.credentials["oauth_token"],
        "developer-token": connection.credentials["developer_token"],
    }
    if connection.credentials.get("login_customer_id"):
        headers["login-customer-id"] = customer_digits(connection.credentials["login_customer_id"])
    customer = customer_digits(connection.credentials["customer_id"])
    url = f"{base_url}/{API_VERSION}/customers/{customer}:uploadClickConversions"
    return Request(url, headers, json.dumps(body).encode())


def _row_errors(failure: dict, events: list[Event]) -> dict[int, str]:
    """Delivery id -> message for each error located at conversions[index]."""
    rows: dict[int, str] = {}
    for detail in failure.get("details") or []:
        for error in (detail or {}).get("errors") or []:
            path = ((error or {}).get("location") or {}).get("fieldPathElements") or []
            index = next((p.get("index") for p in path if p.get("fieldName") == "conversions"), None)
            if isinstance(index, int) and 0 <= index < len(events):
                delivery_id = events[index].delivery_id
                codes = "/".join(str(code) for code in ((error or {}).get("errorCode") or {}).values())
                text = f"{error.get('message', '')} ({codes})" if codes else str(error.get("message", ""))
                rows[delivery_id] = (rows.get(delivery_id, "") + " " + text).strip()
    return rows


def read_answer(code: int, body: bytes, events: list[Event]) -> Answer:
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if code == 200 and isinstance(payload, dict) and isinstance(payload.get("results"), list):
        failure = payload.get("partialFailureError")
        rows = _row_errors(failure, events) if isinstance(failure, dict) else {}
        if isinstance(failure, dict) and not rows:  # A failure we cannot place: nothing is known sent.
            return Answer(False, f"Google Ads answered a failure for no row: {answer_text(body, 200)}")
        return Answer(True, f"{len(events) - len(rows)} uploaded", failed_rows=rows)
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        return Answer(
            False, f"Google Ads answered {code}: {error.get('message', '')} ({error.get('status', '')})."
        )
    return Answer(False, f"Google Ads answered {code} with an unexpected body: {answer_text(body, 200)}")


def test_verdict(row_error: str) -> Answer:
    """A test's made-up gclid is refused by a real account: that refusal, and only that, means the
    account, the conversion action and the tokens were all accepted."""
    if "GCLID" in row_error.upper() and "CONVERSION_ACTION" not in row_error.upper():
        return Answer(
            True, f"Account, conversion action and tokens accepted (the made-up gclid was not: {row_error})"
        )
    return Answer(False, row_error)
