"""Meta's Conversions API: the request for a batch of events and how to read its answer.

https://developers.facebook.com/docs/marketing-api/conversions-api/parameters
POST {graph}/{version}/{pixel id}/events with `data` (at most 1,000 events), each with event_name,
event_time (Unix seconds), event_id (deduplicates with the browser pixel), action_source and
user_data; custom_data value and currency. The access token goes in the body, not the URL, so the URL
can be logged. Customer information a person could be found by (country, external_id) is sent as the
SHA-256 of its normalised value; the click's address, user agent, fbc and fbp are sent as they are, as
the docs require. An event older than 7 days makes Meta refuse the whole request: such events are
never sent (the sender marks them expired).
"""

from __future__ import annotations

import json

from models.conversions.platforms.events import (
    Answer,
    Connection,
    Event,
    Request,
    answer_text,
    sha256_normalised,
)

NAME = "meta"
API_VERSION = "v21.0"
BATCH_LIMIT = 1000
# Meta refuses an event older than 7 days; 10 minutes less, so none crosses the limit on its way there.
MAX_AGE_SECONDS = 7 * 86400 - 600
CREDENTIALS = ("pixel_id", "access_token")
REQUIRED = CREDENTIALS
SECRETS = ("access_token",)
DEFAULT_EVENTS = {"lead": "Lead", "sale": "Purchase"}
CLICK_ID = "fbclid"
INVALID_PARAMETER = 100


def fbc(click_time_ms: int, fbclid: str) -> str:
    """The fbc parameter as the pixel's _fbc cookie would hold it: fb.1.{click time in ms}.{fbclid}."""
    return f"fb.1.{click_time_ms}.{fbclid}"


def event_data(event: Event) -> dict:
    user_data: dict[str, object] = {}
    if event.ip:
        user_data["client_ip_address"] = event.ip
    if event.user_agent:
        user_data["client_user_agent"] = event.user_agent
    if event.click_ids.get("fbclid"):
        user_data["fbc"] = fbc(event.click_time_ms, event.click_ids["fbclid"])
    if event.click_ids.get("fbp"):
        user_data["fbp"] = event.click_ids["fbp"]
    if event.country:
        user_data["country"] = [sha256_normalised(event.country)]
    if event.subid:
        user_data["external_id"] = [sha256_normalised(event.subid)]
    return {
        "event_name": event.event_name,
        "event_time": event.event_time,
        "event_id": event.event_id,
        "action_source": "website",
        "user_data": user_data,
        "custom_data": {"value": round(event.value, 6), "currency": event.currency},
    }


def unusable(event: Event) -> str:
    """Why this event cannot be sent at all ('' when it can): a website event without the browser's user
    agent makes Meta refuse the whole request."""
    if not event.user_agent:
        return "The click has no user agent: Meta refuses a website event without one, so it was not sent."
    return ""


def request(connection: Connection, events: list[Event], base_url: str, *, is_test: bool = False) -> Request:
    """The request for a batch (a test event is an event like another: the test code decides)."""
    body: dict[str, object] = {
        "data": [event_data(event) for event in events],
        "access_token": connection.credentials["access_token"],
    }
    if connection.test_event_code:
        body["test_event_code"] = connection.test_event_code
    url = f"{base_url}/{API_VERSION}/{connection.credentials['pixel_id']}/events"
    return Request(url, {"Content-Type": "application/json"}, json.dumps(body).encode())


def read_answer(code: int, body: bytes, events: list[Event]) -> Answer:
    """200 with events_received for the whole batch; otherwise {"error": {"message", "code", ...}}."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if code == 200 and isinstance(payload, dict) and payload.get("events_received") == len(events):
        return Answer(True, f"events_received {len(events)}")
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        text = f"Meta answered {code}: {error.get('message', '')} (code {error.get('code', '?')})."
        # Code 100 is an invalid parameter; 190 a bad token, 4, 17, 32 and 613 rate limits.
        return Answer(False, text, refused_content=code == 400 and error.get("code") == INVALID_PARAMETER)
    return Answer(False, f"Meta answered {code} with an unexpected body: {answer_text(body, 200)}")
