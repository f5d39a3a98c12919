"""What the spend clients share: the row a platform's report is read into, the error a sync logs, and a
request (a GET, or a POST of a form: Meta's report jobs) that never raises for network trouble."""

from __future__ import annotations

import http.client
import math
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from models.conversions.platforms.sending import Reply, retry_after_seconds
from models.errors import LannerError

USER_AGENT = "Lanner-Spend/1.0"
REQUEST_TIMEOUT = 30.0  # A report page can take a platform a while; past this the run fails and is retried.
MAX_PAGES = 1000  # A platform that keeps naming a next page is answering garbage.
MAX_BODY = 64 << 20
DAY = re.compile(r"\d{4}-\d\d-\d\d")


@dataclass(frozen=True)
class SpendRow:
    """One row of a platform's report: a day (the account's, YYYY-MM-DD), the platform's ids finest
    first (ad, ad set, campaign: a mapping is looked up in this order), the id a click's parameter
    holds (`detail`: the ad, ad set or zone id), the spend and its currency ('' if not said)."""

    day: str
    ids: tuple[str, ...]
    detail: str
    spend: float
    currency: str = ""


class SpendError(LannerError):
    """A report that could not be read (the platform refused, failed, answered garbage or nothing): one
    sentence for the sync log; `retry_after` when the platform asked to wait."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# (url, headers) -> Reply; with `method="POST", body=...` a POST of that body (the clients that need one).
Get = Callable[..., Reply]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the credential headers to whatever host it names: it is the answer."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def http_get(
    url: str,
    headers: dict[str, str],
    timeout: float = REQUEST_TIMEOUT,
    *,
    method: str = "GET",
    body: bytes | None = None,
) -> Reply:
    """GET `url` (which holds no credential: it is logged), or `method` it with `body`; redirects not
    followed; never raises."""
    request = urllib.request.Request(
        url, data=body, method=method, headers={"User-Agent": USER_AGENT, **headers}
    )
    try:
        with _opener.open(request, timeout=timeout) as response:
            return Reply(response.status, response.read(MAX_BODY))
    except urllib.error.HTTPError as exc:
        body = exc.read(1 << 20) if exc.fp is not None else b""
        return Reply(exc.code, body, retry_after_seconds(exc.headers.get("Retry-After")))
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Reply(None, b"", error=f"The request failed: {reason}.")


def no_answer(platform: str, reply: Reply) -> SpendError:
    return SpendError(f"{platform} did not answer: {reply.error or 'no reply'} The next run tries again.")


def amount(value: object) -> float | None:
    """A spend as platforms print it (a number, or a number in a string); None for anything else."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]  # Anything: checked here.
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def text_id(value: object) -> str:
    """An id as the platform gave it (a number or a string) as text; '' for anything else."""
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return value.strip()[:200] if isinstance(value, str) else ""


def day_of(value: object) -> str:
    """The YYYY-MM-DD a date (or a `YYYY-MM-DD hh:mm:ss` time) starts with; '' if it is none."""
    text = value[:10] if isinstance(value, str) else ""
    return text if DAY.fullmatch(text) else ""
