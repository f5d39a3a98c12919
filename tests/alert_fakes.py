"""Local fakes of the services alerts go to, each enforcing its documented contract.

One ThreadingHTTPServer on 127.0.0.1:0 answers:
- Telegram's Bot API, POST /bot<token>/sendMessage (https://core.telegram.org/bots/api#sendmessage):
  an unknown token gets 401 {"ok": false, "error_code": 401, "description": "Unauthorized"}, a missing
  chat_id or text, or text over 4096 characters, 400 {"ok": false, ...}; parse_mode HTML with an
  unknown tag or a bare '<' or '&' is 400 "can't parse entities", as Telegram answers it.
- Slack's incoming webhooks, POST /services/<path> (https://api.slack.com/messaging/webhooks): an
  unknown path 404 "no_service", a body without text 400 "invalid_payload"; 200 "ok".
- A webhook receiver, POST /hook: it verifies Lanner-Signature as docs/alerts.md tells a receiver to
  (HMAC-SHA256 of "<t>." + body with the shared secret, t within 5 minutes), written here on its own
  from the docs, not by calling Lanner's code; a bad signature gets 400.
Each keeps what it accepted, keyed by what makes a message one (Telegram and Slack: the text; the
webhook: Lanner-Alert-Id), and counts repeats. `script` queues answers (a 500, a 429, garbage, a hang)
for the next requests before the service's own handling resumes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BOT_TOKEN = "123456789:AAE-fake-telegram-token_0123456789"
CHAT_ID = "-1001234567890"
SLACK_PATH = "/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"
SIGNING_SECRET = "whsec-0123456789abcdef0123456789abcdef"
REPLAY_WINDOW = 300
TELEGRAM_TAGS = re.compile(r"</?(b|strong|i|em|u|ins|s|strike|del|code|pre)>")


@dataclass
class Scripted:
    code: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    hang: float = 0.0


class AlertFake:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted: dict[str, list] = {"telegram": [], "slack": [], "webhook": []}
        self.repeats: list[tuple[str, str]] = []
        self.requests: list[tuple[str, int]] = []  # (service, code answered)
        self.queued: list[Scripted] = []
        self.seen_keys: set[tuple[str, str]] = set()
        self.generation = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                service = (
                    "telegram"
                    if self.path.startswith("/bot")
                    else "slack"
                    if self.path.startswith("/services/")
                    else "webhook"
                )
                with owner.lock:
                    scripted = owner.queued.pop(0) if owner.queued else None
                    generation = owner.generation
                if scripted is not None:
                    if scripted.hang:
                        time.sleep(scripted.hang)
                    code, body, headers = scripted.code, scripted.body, scripted.headers
                else:
                    code, body, headers = owner.handle(service, self.path, dict(self.headers), raw)
                with owner.lock:
                    if generation == owner.generation:  # Not a hung request of a test before reset().
                        owner.requests.append((service, code))
                try:
                    self.send_response(code)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # The sender gave up waiting (a hang longer than its timeout).

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, *answers: Scripted) -> None:
        with self.lock:
            self.queued.extend(answers)

    def messages(self, service: str) -> list:
        with self.lock:
            return list(self.accepted[service])

    def reset(self) -> None:
        """Forget everything: the next test's messages and repeats are its own."""
        with self.lock:
            self.accepted = {"telegram": [], "slack": [], "webhook": []}
            self.repeats, self.requests, self.queued = [], [], []
            self.seen_keys = set()
            self.generation += 1

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _keep(self, service: str, key: str, message) -> None:
        with self.lock:
            if (service, key) in self.seen_keys:
                self.repeats.append((service, key))
            self.seen_keys.add((service, key))
            self.accepted[service].append(message)

    def handle(self, service: str, path: str, headers: dict, raw: bytes) -> tuple[int, bytes, dict]:
        return getattr(self, service)(path, headers, raw)

    @staticmethod
    def _json(code: int, body: dict) -> tuple[int, bytes, dict]:
        return code, json.dumps(body).encode(), {"Content-Type": "application/json"}

    def telegram(self, path: str, headers: dict, raw: bytes) -> tuple[int, bytes, dict]:
        def error(code: int, description: str) -> tuple[int, bytes, dict]:
            return self._json(code, {"ok": False, "error_code": code, "description": description})

        match = re.fullmatch(r"/bot([^/]+)/sendMessage", path)
        if match is None or match.group(1) != BOT_TOKEN:
            return error(401, "Unauthorized")
        try:
            body = json.loads(raw)
        except ValueError:
            return error(400, "Bad Request: invalid JSON")
        text = body.get("text")
        if not body.get("chat_id") or not isinstance(text, str) or not text:
            return error(400, "Bad Request: message text is empty")
        if str(body["chat_id"]) != CHAT_ID:
            return error(400, "Bad Request: chat not found")
        if len(text) > 4096:
            return error(400, "Bad Request: message is too long")
        if body.get("parse_mode") == "HTML":
            bare = TELEGRAM_TAGS.sub("", text)
            if "<" in bare or ">" in bare or re.search(r"&(?!(lt|gt|amp|quot);)", bare):
                return error(400, "Bad Request: can't parse entities")
        self._keep("telegram", text, body)
        return self._json(
            200, {"ok": True, "result": {"message_id": len(self.accepted["telegram"]), "text": text}}
        )

    def slack(self, path: str, headers: dict, raw: bytes) -> tuple[int, bytes, dict]:
        if path != SLACK_PATH:
            return 404, b"no_service", {}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, b"invalid_payload", {}
        if not isinstance(body, dict) or not isinstance(body.get("text"), str) or not body["text"]:
            return 400, b"no_text", {}
        self._keep("slack", body["text"], body)
        return 200, b"ok", {}

    def webhook(self, path: str, headers: dict, raw: bytes) -> tuple[int, bytes, dict]:
        signed = {}
        for part in headers.get("Lanner-Signature", "").split(","):
            key, _, value = part.partition("=")
            signed[key.strip()] = value.strip()
        try:
            sent_at = int(signed["t"])
        except (KeyError, ValueError):
            return 400, b"no signature", {}
        if abs(time.time() - sent_at) > REPLAY_WINDOW:
            return 400, b"too old", {}
        expected = hmac.new(
            SIGNING_SECRET.encode(), str(sent_at).encode() + b"." + raw, hashlib.sha256
        ).hexdigest()
        if not hmac.compare_digest(expected, signed.get("v1", "")):
            return 400, b"bad signature", {}
        body = json.loads(raw)
        if str(body["id"]) != headers.get("Lanner-Alert-Id"):
            return 400, b"id mismatch", {}
        self._keep("webhook", str(body["id"]), body)
        return 204, b"", {}
