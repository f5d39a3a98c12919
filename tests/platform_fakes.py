"""Local fakes of the ad platforms' conversion APIs, each enforcing its documented contract.

One ThreadingHTTPServer on 127.0.0.1:0 answers all three platforms' paths. It checks what the real
platform checks (the docs are cited at each handler), keeps the events it accepted by event id, and
counts any it had already accepted (a platform would deduplicate them; a test asserts there are none).
`script` queues answers for the next requests (a 500, a 429 with Retry-After, garbage, a hang) before
the platform's own handling resumes; `down` answers every request alike until it is cleared.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

META_TOKEN = "EAAB-meta-token-0123456789"
META_PIXEL = "1234567890"
TIKTOK_TOKEN = "tt-access-token-abcdef123456"
TIKTOK_PIXEL = "CPIXEL123"
GOOGLE_OAUTH = "ya29.google-oauth-token-9876"
GOOGLE_DEVELOPER = "dev-token-google-5555"
GOOGLE_CUSTOMER = "1234567890"
GOOGLE_ACTION = "987654"

HEX64 = re.compile(r"[0-9a-f]{64}")
# https://developers.facebook.com/docs/marketing-api/conversions-api/parameters/customer-information-parameters
META_HASHED = ("em", "ph", "fn", "ln", "db", "ge", "ct", "st", "zp", "country", "external_id")
META_PLAIN = ("client_ip_address", "client_user_agent", "fbc", "fbp")
META_ACTION_SOURCES = (
    "email",
    "website",
    "app",
    "phone_call",
    "chat",
    "physical_store",
    "system_generated",
    "other",
)
GOOGLE_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d\d:\d\d")


@dataclass
class Scripted:
    code: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0  # Seconds to wait before answering (a slow platform).


@dataclass
class Received:
    platform: str
    path: str
    headers: dict[str, str]
    body: dict | None
    code: int = 0  # What the fake answered.


class PlatformFake:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.requests: list[Received] = []
        self.accepted: dict[str, dict[str, dict]] = {"meta": {}, "tiktok": {}, "google_ads": {}}
        self.repeats: list[tuple[str, str]] = []  # (platform, event id) accepted a second time.
        self.queued: list[Scripted] = []
        self.down: Scripted | None = None  # While set, every request gets this answer.
        self.unknown_gclids: set[str] = set()
        # Events refused for a reason of the platform's own (an invalid parameter), and their requests whole.
        self.refused_event_ids: set[str] = set()
        self.gclid_known: Callable[[str], bool] = lambda gclid: gclid not in self.unknown_gclids
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                platform = owner.platform_of(self.path)
                seen = Received(platform, self.path, headers, body if isinstance(body, dict) else None)
                with owner.lock:
                    owner.requests.append(seen)
                    scripted = owner.queued.pop(0) if owner.queued else owner.down
                if scripted is not None:
                    if scripted.hang:
                        time.sleep(scripted.hang)
                    code, payload, extra = scripted.code, scripted.body, scripted.headers
                else:
                    code, answer = owner.handle(platform, self.path, headers, seen.body)
                    payload, extra = json.dumps(answer).encode(), {}
                seen.code = code
                try:
                    self.send_response(code)
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # The client gave up waiting (a slow-platform test).

            do_GET = do_POST  # Recorded too: a client that followed a redirect as a GET.

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *answers: Scripted) -> None:
        with self.lock:
            self.queued.extend(answers)

    def events(self, platform: str) -> dict[str, dict]:
        with self.lock:
            return dict(self.accepted[platform])

    def seen(self, platform: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if platform is None or r.platform == platform]

    def wait_for_events(self, platform: str, count: int, deadline_seconds: float = 60) -> dict[str, dict]:
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            events = self.events(platform)
            if len(events) >= count:
                return events
            time.sleep(0.05)
        raise AssertionError(f"{platform} accepted {len(self.events(platform))} events, expected {count}")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    @staticmethod
    def platform_of(path: str) -> str:
        if path.startswith("/open_api/"):
            return "tiktok"
        if ":uploadClickConversions" in path:
            return "google_ads"
        return "meta"

    def handle(
        self, platform: str, path: str, headers: dict[str, str], body: dict | None
    ) -> tuple[int, dict]:
        if platform == "meta":
            return self.meta(path, body)
        if platform == "tiktok":
            return self.tiktok(path, headers, body)
        return self.google(path, headers, body)

    def _accept(self, platform: str, key: str, event: dict) -> None:
        with self.lock:
            if key in self.accepted[platform]:
                self.repeats.append((platform, key))
            self.accepted[platform][key] = event

    # https://developers.facebook.com/docs/marketing-api/conversions-api/parameters
    # https://developers.facebook.com/docs/marketing-api/conversions-api/using-the-api#send
    def meta(self, path: str, body: dict | None) -> tuple[int, dict]:
        def error(
            message: str, code: int = 100, subcode: int | None = None, status: int = 400
        ) -> tuple[int, dict]:
            payload = {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEf"}
            if subcode:
                payload["error_subcode"] = subcode
            return status, {"error": payload}

        match = re.fullmatch(r"/v\d+\.\d+/(\w+)/events", path)
        if not match:
            return error("Unknown path components", 2500)
        if body is None:
            return error("Invalid parameter: the body is not JSON")
        if body.get("access_token") != META_TOKEN:
            return error("Invalid OAuth access token - Cannot parse access token", 190, status=400)
        if match.group(1) != META_PIXEL:
            return error(
                f"Unsupported post request. Object with ID '{match.group(1)}' does not exist", 100, 33
            )
        data = body.get("data")
        if not isinstance(data, list) or not 1 <= len(data) <= 1000:
            return error("Invalid parameter: data must hold 1 to 1000 events")
        now = self.clock()
        for event in data:  # Any bad event refuses the whole request: nothing of it is kept.
            if event.get("event_id") in self.refused_event_ids:
                return error(f"Invalid parameter: event {event['event_id']} is not valid", 100, 2804999)
            for name in ("event_name", "event_time", "action_source", "user_data"):
                if name not in event:
                    return error(f"Invalid parameter: {name} is required")
            if not isinstance(event["event_time"], int):
                return error("Invalid parameter: event_time must be a Unix timestamp in seconds")
            if event["event_time"] < now - 7 * 86400:
                return error("Invalid parameter: event_time is more than 7 days in the past", 100, 2804003)
            if event["event_time"] > now + 60:
                return error("Invalid parameter: event_time is in the future", 100, 2804004)
            if event["action_source"] not in META_ACTION_SOURCES:
                return error("Invalid parameter: action_source")
            user = event["user_data"]
            if not isinstance(user, dict) or not user:
                return error("Invalid parameter: user_data needs customer information")
            if event["action_source"] == "website" and not (
                user.get("client_user_agent") and (user.get("client_ip_address") or user.get("fbc"))
            ):
                return error("Invalid parameter: a website event needs client_user_agent", 100, 2804050)
            for key in META_HASHED:
                values = user.get(key)
                for value in values if isinstance(values, list) else ([values] if values is not None else []):
                    if not isinstance(value, str) or not HEX64.fullmatch(value):
                        return error(f"Invalid parameter: {key} must be a SHA-256 hash", 100, 2804015)
            for key in META_PLAIN:
                if key in user and (not isinstance(user[key], str) or HEX64.fullmatch(user[key])):
                    return error(f"Invalid parameter: {key} must not be hashed", 100, 2804016)
            if "fbc" in user and not re.fullmatch(r"fb\.1\.\d{13}\..+", user["fbc"]):
                return error("Invalid parameter: fbc is not fb.1.{click time ms}.{fbclid}", 100, 2804019)
            custom = event.get("custom_data") or {}
            if "value" in custom and not isinstance(custom["value"], (int, float)):
                return error("Invalid parameter: value must be a number")
            if "currency" in custom and not re.fullmatch(r"[A-Za-z]{3}", str(custom["currency"])):
                return error("Invalid parameter: currency must be an ISO 4217 code")
        for event in data:
            self._accept(
                "meta",
                f"{event['event_name']}:{event.get('event_id', '')}",
                event | {"test": body.get("test_event_code")},
            )
        return 200, {"events_received": len(data), "messages": [], "fbtrace_id": "AbCdEf"}

    # https://business-api.tiktok.com/portal/docs?id=1771101027431425 (Events API 2.0, web events)
    def tiktok(self, path: str, headers: dict[str, str], body: dict | None) -> tuple[int, dict]:
        def error(code: int, message: str) -> tuple[int, dict]:
            return 200, {
                "code": code,
                "message": message,
                "request_id": "req-1",
                "data": {},
            }  # Always HTTP 200.

        if path != "/open_api/v1.3/event/track/":
            return 404, {"code": 40400, "message": "Not found"}
        if headers.get("access-token") != TIKTOK_TOKEN:
            return error(40105, "Access token is incorrect or has been revoked.")
        if body is None:
            return error(40002, "Invalid JSON body.")
        if body.get("event_source") != "web" or body.get("event_source_id") != TIKTOK_PIXEL:
            return error(40002, "event_source must be web and event_source_id an existing pixel code.")
        data = body.get("data")
        if not isinstance(data, list) or not 1 <= len(data) <= 1000:
            return error(40002, "data must hold 1 to 1000 events.")
        for event in data:
            if event.get("event_id") in self.refused_event_ids:
                return error(40002, f"Invalid parameter: event {event['event_id']} is not valid.")
            for name in ("event", "event_time"):
                if name not in event:
                    return error(40002, f"{name} is required.")
            if not isinstance(event["event_time"], int):
                return error(40002, "event_time must be a Unix timestamp in seconds.")
            user = event.get("user") or {}
            for key in ("email", "phone", "external_id"):
                if key in user and not HEX64.fullmatch(str(user[key])):
                    return error(40002, f"user.{key} must be SHA-256 hashed.")
            properties = event.get("properties") or {}
            if "value" in properties and not isinstance(properties["value"], (int, float)):
                return error(40002, "properties.value must be a number.")
        for event in data:
            self._accept(
                "tiktok", str(event.get("event_id", "")), event | {"test": body.get("test_event_code")}
            )
        return 200, {"code": 0, "message": "OK", "request_id": "req-1", "data": {}}

    # https://developers.google.com/google-ads/api/rest/reference/rest/v17/customers/uploadClickConversions
    # https://developers.google.com/google-ads/api/docs/best-practices/partial-failures
    def google(self, path: str, headers: dict[str, str], body: dict | None) -> tuple[int, dict]:
        def error(status: int, message: str, reason: str) -> tuple[int, dict]:
            return status, {"error": {"code": status, "message": message, "status": reason}}

        match = re.fullmatch(r"/v17/customers/(\d+):uploadClickConversions", path)
        if not match:
            return error(404, "Not found.", "NOT_FOUND")
        if headers.get("authorization") != f"Bearer {GOOGLE_OAUTH}":
            return error(401, "Request is missing required authentication credential.", "UNAUTHENTICATED")
        if headers.get("developer-token") != GOOGLE_DEVELOPER:
            return error(401, "The developer token is not valid.", "UNAUTHENTICATED")
        if match.group(1) != GOOGLE_CUSTOMER:
            return error(403, "The caller does not have permission.", "PERMISSION_DENIED")
        if body is None or body.get("partialFailure") is not True:
            return error(400, "partialFailure must be true for uploadClickConversions.", "INVALID_ARGUMENT")
        conversions = body.get("conversions")
        if not isinstance(conversions, list) or not 1 <= len(conversions) <= 2000:
            return error(400, "conversions must hold 1 to 2000 rows.", "INVALID_ARGUMENT")
        action = f"customers/{GOOGLE_CUSTOMER}/conversionActions/{GOOGLE_ACTION}"
        results: list[dict] = []
        errors: list[dict] = []
        for index, row in enumerate(conversions):
            problem = ""
            if row.get("conversionAction") != action:
                problem = (
                    "conversionActionError",
                    "INVALID_CONVERSION_ACTION",
                    "The conversion action is not valid.",
                )
            elif not GOOGLE_DATE_TIME.fullmatch(str(row.get("conversionDateTime", ""))):
                problem = (
                    "dateError",
                    "INVALID_STRING_DATE_TIME",
                    "conversionDateTime is not yyyy-mm-dd hh:mm:ss+|-hh:mm.",
                )
            elif not row.get("gclid") or not self.gclid_known(row["gclid"]):
                problem = (
                    "conversionUploadErrorCode",
                    "UNPARSEABLE_GCLID",
                    "The gclid could not be decoded.",
                )
            elif row.get("orderId") and row["orderId"] in self.events("google_ads"):
                problem = (
                    "conversionUploadErrorCode",
                    "DUPLICATE_ORDER_ID",
                    "A conversion with this order id exists.",
                )
            if problem:
                kind, code, message = problem
                errors.append(
                    {
                        "errorCode": {kind: code},
                        "message": message,
                        "location": {"fieldPathElements": [{"fieldName": "conversions", "index": index}]},
                    }
                )
                results.append({})
                continue
            if body.get("validateOnly") is not True:  # Validated only: checked, nothing recorded.
                self._accept("google_ads", str(row.get("orderId", "")), row)
            results.append(
                {
                    "gclid": row["gclid"],
                    "conversionAction": action,
                    "conversionDateTime": row["conversionDateTime"],
                }
            )
        answer: dict = {"results": results}
        if errors:
            first_index = errors[0]["location"]["fieldPathElements"][0]["index"]
            answer["partialFailureError"] = {
                "code": 3,
                "message": f"{errors[0]['message']}, at conversions[{first_index}]",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.ads.googleads.v17.errors.GoogleAdsFailure",
                        "errors": errors,
                    }
                ],
            }
        return 200, answer
