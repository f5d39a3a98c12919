"""A click's decision path: the route summary (models/routing/router.py) read back step by step.

The router writes the summary; `decide` (models/clicks/decision.py) ends it with a bot's reason when
the click path checked it (`!` and the reason, percent-quoted so it has no space) and what the visitor
got (`=h` a 302, `=m` a meta refresh, `=j` a JS redirect, `=p` the stream's page, `=b` a blank page,
`=n` a 404). The spool flusher adds the origin a redirect went to (`@https://safe.example`: a default
action's or a stream's own URL; an offer's or a lander's is theirs, named by its step, and not kept
per click: ~24 bytes a click) and the reason of a bot it checked itself. The answer step marks a
recorded path: a summary without it was stored before the path was kept, and is "not recorded"
rather than guessed from today's config.

PERF: the steps cost the click path two string joins; the origin and most bot reasons are added by
the flusher, off the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

# The answer step of each Decision.answer (models/clicks/decision.py ANSWERS).
ANSWER_STEPS = {"http": "=h", "meta": "=m", "js": "=j", "html": "=p", "blank": "=b", "not_found": "=n"}
ANSWERS_OF_STEPS = {step[1]: answer for answer, step in ANSWER_STEPS.items()}
_REDIRECT_STEPS = ("=h", "=m", "=j")  # Answers that send the visitor to a URL: their origin is kept.
MAX_ORIGIN = 100
MAX_REASON = 120

_STREAM_STEP = re.compile(r"(\d+)([-+co])(\d*)")
# An offer or lander step: the URL is theirs, named by them; its origin is not kept per click.
_NAMED_TARGET = re.compile(r"(?:^| )[ol]\d")


def answer_step(answer: str) -> str:
    return ANSWER_STEPS[answer]


def bot_step(reason: str) -> str:
    """The step of a bot verdict: its reason, quoted so it holds no space."""
    return "!" + quote(reason[:MAX_REASON], safe=":/.,()-_")


def is_recorded(summary: str) -> bool:
    """Whether a stored summary holds the decision path (its answer step), or predates it."""
    return summary.startswith("=") or " =" in summary


def with_flushed_steps(summary: str, location: str, bot_reason: str | None) -> str:
    """`summary` with what the flusher knows: the origin of the URL a redirect answered, the reason
    of a bot the click path did not check. A summary without the path (an old release's line) is kept."""
    if not is_recorded(summary):
        return summary
    if location and summary.endswith(_REDIRECT_STEPS) and _NAMED_TARGET.search(summary) is None:
        origin = origin_of(location)
        if origin:
            summary = f"{summary} @{origin}"
    if bot_reason is not None:
        summary = f"{summary} {bot_step(bot_reason)}"
    return summary


def origin_of(location: str) -> str:
    """scheme://host[:port] of an absolute URL, '' for a relative one (a local lander's path)."""
    scheme_end = location.find("://")
    if scheme_end <= 0:
        return ""
    end = len(location)
    for stop in "/?#":
        at = location.find(stop, scheme_end + 3)
        if at != -1 and at < end:
            end = at
    origin = location[:end]
    host = origin[scheme_end + 3 :].rpartition("@")[2]  # Never a password a template put in the URL.
    origin = origin[: scheme_end + 3] + host
    if len(origin) > MAX_ORIGIN:
        return ""
    return quote(origin, safe=":/[].-_~")


@dataclass(frozen=True)
class Step:
    """One step of a recorded path. `kind`: stream (`stream` the id, `verdict` one of "matched",
    "no match", "capped", "offers capped", "bound", `filter` the deciding filter's place or None),
    campaign (`text` the alias sent to), lander, offer (`number` the id), pick ("weight", "bandit",
    "unvisited", "fallback" in `text`), answer (`text` a Decision answer), origin, bot (`text`)."""

    kind: str
    number: int | None = None
    verdict: str = ""
    filter: int | None = None
    text: str = ""


_VERDICTS = {"-": "no match", "+": "matched", "c": "capped", "o": "offers capped"}
_PICKS = {"w": "weight", "t": "bandit", "u": "unvisited", "f": "fallback"}


def read_path(summary: str) -> list[Step] | None:
    """The steps of a recorded path, in order; None when the summary predates the path."""
    if not is_recorded(summary):
        return None
    steps = []
    for token in summary.split():
        head, rest = token[0], token[1:]
        if head.isdigit():
            found = _STREAM_STEP.fullmatch(token)
            if found is None:
                continue
            number, sign, place = found.groups()
            steps.append(Step("stream", int(number), _VERDICTS[sign], int(place) if place else None))
        elif head == "b" and rest.isdigit():
            steps.append(Step("stream", int(rest), "bound"))
        elif head == "o" and rest.isdigit():
            steps.append(Step("offer", int(rest)))
        elif head == "l" and rest.isdigit():
            steps.append(Step("lander", int(rest)))
        elif head == ">":
            steps.append(Step("campaign", text=rest))
        elif token in _PICKS:
            steps.append(Step("pick", text=_PICKS[token]))
        elif head == "=" and rest in ANSWERS_OF_STEPS:
            steps.append(Step("answer", text=ANSWERS_OF_STEPS[rest]))
        elif head == "@":
            steps.append(Step("origin", text=unquote(rest)))
        elif head == "!":
            steps.append(Step("bot", text=unquote(rest)))
    return steps
