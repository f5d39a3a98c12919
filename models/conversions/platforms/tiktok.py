"""TikTok's Events API (web events): the request for a batch and how to read its answer.

https://business-api.tiktok.com/portal/docs?id=1771101027431425
POST {api}/open_api/v1.3/event/track/ with the Access-Token header; body event_source "web",
event_source_id (the pixel code) and `data` (at most 1,000 events), each with event, event_time
(Unix seconds), event_id, user (ttclid, ip, user_agent) and properties (value, currency). TikTok
answers HTTP 200 even when it refuses a request: the body's `code` is 0 only on success.
"""

from __future__ import annotations

import json

from models.conversions.platforms.events import Answer, Connection, Event, Request, answer_text

NAME = "tiktok"
PATH = "/open_api/v1.3/event/track/"
BATCH_LIMIT = 1000
MAX_AGE_SECONDS = 0  # TikTok states no limit the sender must keep.
CREDENTIALS = ("pixel_code", "access_token")
REQUIRED = CREDENTIALS
SECRETS = ("access_token",)
DEFAULT_EVENTS = {"lead": "SubmitForm", "sale": "CompletePayment"}
CLICK_ID = "ttclid"
INVALID_PARAMETER = 40002  # Its other codes: a bad token (40105), permissions, rate limits.


def event_data(event: Event) -> dict:
    user: dict[str, str] = {}
    if event.click_ids.get("ttclid"):
        user["ttclid"] = event.click_ids["ttclid"]
    if event.ip:
        user["ip"] = event.ip
    if event.user_agent:
        user["user_agent"] = event.user_agent
    return {
        "event": event.event_name,
        "event_time": event.event_time,
        "event_id": event.event_id,
        "user": user,
        "properties": {"value": round(event.value, 6), "currency": event.currency},
    }


def unusable(event: Event) -> str:
    return ""


def request(connection: Connection, events: list[Event], base_url: str, *, is_test: bool = False) -> Request:
    """The request for a batch (a test event is an event like another: the test code decides)."""
    body: dict[str, object] = {
        "event_source": "web",
        "event_source_id": connection.credentials["pixel_code"],
        "data": [event_data(event) for event in events],
    }
    if connection.test_event_code:
        body["test_event_code"] = connection.test_event_code
    headers = {"Content-Type": "application/json", "Access-Token": connection.credentials["access_token"]}
    return Request(base_url + PATH, headers, json.dumps(body).encode())


def read_answer(code: int, body: bytes, events: list[Event]) -> Answer:
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or not isinstance(payload.get("code"), int):
        return Answer(False, f"TikTok answered {code} with an unexpected body: {answer_text(body, 200)}")
    if code == 200 and payload["code"] == 0:
        return Answer(True, f"OK ({len(events)} events)")
    text = f"TikTok answered {code}, code {payload['code']}: {payload.get('message', '')}"
    return Answer(False, text, refused_content=payload["code"] == INVALID_PARAMETER)
