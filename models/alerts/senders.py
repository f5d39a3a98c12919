"""How each kind of alert channel is sent a message, and what its answer means.

- Telegram's Bot API (https://core.telegram.org/bots/api#making-requests, #sendmessage): POST
  BASE/bot<token>/sendMessage with JSON {chat_id, text, parse_mode}; the answer is JSON, {"ok": true,
  "result": ...} or {"ok": false, "error_code": 401, "description": "Unauthorized"}; a 429 carries
  parameters.retry_after (seconds). Text is at most 4096 characters; with parse_mode HTML only <, > and
  & need escaping.
- Slack's incoming webhooks (https://api.slack.com/messaging/webhooks#handling_errors): POST JSON
  {"text": ...} to the webhook's URL; it answers 200 "ok", or a 4xx with a word such as
  invalid_payload, invalid_token, no_service, channel_is_archived; a 429 carries Retry-After. Its
  mrkdwn escapes &, < and >.
- A generic webhook: POST JSON {id, kind, title, text, data, created_at} signed like Stripe's
  webhooks: `Lanner-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`, and
  `Lanner-Alert-Id` for a receiver to drop a retry it already has. Any 2xx is taken; 429 and 503 may
  carry Retry-After.

A send never raises for the network or the answer: it returns what happened, one sentence without the
secret (a Telegram error names the URL, which holds the bot token).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

REQUEST_TIMEOUT = 10.0
USER_AGENT = "Lanner-Alerts/1.0"
TELEGRAM_MAX_TEXT = 4096
SIGNATURE_HEADER = "Lanner-Signature"
ID_HEADER = "Lanner-Alert-Id"
REPLAY_WINDOW_SECONDS = 300  # What docs/alerts.md tells a receiver to accept.


@dataclass(frozen=True)
class AlertConfig:
    """Where the services are (local fakes in tests) and how long a request may take."""

    telegram_api_url: str = "https://api.telegram.org"
    slack_webhook_url: str = "https://hooks.slack.com"
    timeout: float = REQUEST_TIMEOUT

    @classmethod
    def from_settings(cls, settings) -> AlertConfig:
        return cls(settings.telegram_api_url, settings.slack_webhook_url)


@dataclass(frozen=True)
class Message:
    id: int
    kind: str
    title: str
    body: str
    data: dict[str, Any]
    created_at: int  # UTC ms.


@dataclass(frozen=True)
class SendResult:
    is_sent: bool
    code: int | None = None
    error: str = ""
    retry_after: float | None = None  # What the service asked for (429), seconds.


def _post(
    url: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int | None, bytes, Any, str]:
    """(status, body, headers, error sentence or '')."""
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("User-Agent", USER_AGENT)
    request.add_header("Content-Type", "application/json")
    for name, value in headers.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(65536), response.headers, ""
    except urllib.error.HTTPError as exc:
        try:
            answer = exc.read(65536)
        except (OSError, http.client.HTTPException):
            answer = b""
        return exc.code, answer, exc.headers, ""
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, b"", {}, f"The request failed: {reason}."


def _retry_after(headers: Any) -> float | None:
    try:
        value = float(headers.get("Retry-After", ""))
    except (TypeError, ValueError, AttributeError):
        return None
    return value if 0 <= value < 86400 else None


def _hide(text: str, *secrets: str) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "****")
    return text


def html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def telegram_text(title: str, body: str) -> str:
    """The message as Telegram's HTML: the title bold, the rest escaped, cut to 4096 characters where no
    entity (&amp; ...) is split (Telegram refuses a message it cannot parse)."""
    text = f"<b>{html_escape(title[:300])}</b>\n{html_escape(body)}"
    if len(text) <= TELEGRAM_MAX_TEXT:
        return text
    text = text[: TELEGRAM_MAX_TEXT - 2]
    if text.rfind("&") > text.rfind(";"):
        text = text[: text.rfind("&")]
    return text + " …"


def send_telegram(
    secrets: dict[str, str], options: dict[str, str], message: Message, config: AlertConfig
) -> SendResult:
    token = secrets["bot_token"]
    text = telegram_text(message.title, message.body)
    payload = {"chat_id": options["chat_id"], "text": text, "parse_mode": "HTML"}
    url = f"{config.telegram_api_url}/bot{token}/sendMessage"
    code, answer, headers, error = _post(url, json.dumps(payload).encode(), {}, config.timeout)
    if code is None:
        return SendResult(False, None, _hide(error, token))
    try:
        said = json.loads(answer)
        is_ok = said["ok"] is True
    except (ValueError, TypeError, KeyError):
        return SendResult(False, code, f"Telegram answered {code} with something that is not its JSON.")
    if code == 200 and is_ok:
        return SendResult(True, code)
    retry = None
    if isinstance(said.get("parameters"), dict):
        value = said["parameters"].get("retry_after")
        retry = float(value) if isinstance(value, int | float) and 0 <= value < 86400 else None
    description = str(said.get("description") or "")[:200]
    return SendResult(False, code, _hide(f"Telegram answered {code}: {description}", token), retry)


def send_slack(
    secrets: dict[str, str], options: dict[str, str], message: Message, config: AlertConfig
) -> SendResult:
    url = secrets["webhook_url"]
    text = f"*{html_escape(message.title)}*\n{html_escape(message.body)}"
    code, answer, headers, error = _post(url, json.dumps({"text": text}).encode(), {}, config.timeout)
    if code is None:
        return SendResult(False, None, _hide(error, url))
    said = answer.decode("utf-8", "replace").strip()
    if code == 200 and said == "ok":
        return SendResult(True, code)
    retry = _retry_after(headers) if code == 429 else None
    return SendResult(False, code, _hide(f"Slack answered {code}: {said[:100]!r}", url), retry)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The Lanner-Signature header's value for `body` sent at `timestamp` (unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def webhook_body(message: Message) -> bytes:
    return json.dumps(
        {
            "id": message.id,
            "kind": message.kind,
            "title": message.title,
            "text": message.body,
            "data": message.data,
            "created_at": message.created_at,
        },
        sort_keys=True,
        default=str,
    ).encode()


def send_webhook(
    secrets: dict[str, str],
    options: dict[str, str],
    message: Message,
    config: AlertConfig,
    *,
    clock=time.time,
) -> SendResult:
    body = webhook_body(message)
    secret = secrets["signing_secret"]
    headers = {SIGNATURE_HEADER: signature(secret, int(clock()), body), ID_HEADER: str(message.id)}
    code, answer, answered, error = _post(options["url"], body, headers, config.timeout)
    if code is None:
        return SendResult(False, None, _hide(error, secret))
    if 200 <= code < 300:
        return SendResult(True, code)
    retry = _retry_after(answered) if code in (429, 503) else None
    said = answer.decode("utf-8", "replace").strip()[:100]
    return SendResult(False, code, _hide(f"The webhook answered {code}: {said!r}", secret), retry)


SENDERS = {"telegram": send_telegram, "slack": send_slack, "webhook": send_webhook}
