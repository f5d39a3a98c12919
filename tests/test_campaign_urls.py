"""Campaign URLs run in front of Falcon (routes/campaignurls.py) answer what Falcon answers, byte for byte.

Each request is sent twice on a real migrated database and spool, to the worker's app (`urls`) and to the
Falcon app behind it (`urls.app`), from two new visitors with the subid fixed, so both clicks are new
and their answers comparable: status, every header in order, body.
"""

from __future__ import annotations

import itertools

import pytest

SUBID = "1m94f2mxfr2zrddfw"


@pytest.fixture
def urls(db, settings, monkeypatch):
    from app import build_tracker, create_worker_app
    from models.admin.services import create_campaign

    create_campaign(db, "Summer", "summer", offer_url="https://offer.example/?click={subid}&s1={sub_id_1}")
    monkeypatch.setattr("models.clicks.tracker.new_subid", lambda now_ms=None: SUBID)
    tracker = build_tracker(db, settings)
    yield create_worker_app(settings, tracker=tracker)
    tracker.close()


_peers = (f"198.51.100.{n}" for n in itertools.count(1))


def answer(app, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple:
    """(status, headers as sent, body, the environ after) of one request from a new visitor."""
    from falcon.testing import StartResponseMock, create_environ

    path, _, query = path.partition("?")
    environ = create_environ(path=path, query_string=query, method=method, headers=headers or {})
    environ["REMOTE_ADDR"] = next(_peers)
    started = StartResponseMock()
    body = b"".join(app(environ, started))
    return started.status, started.headers, body, environ


CASES = [
    ("GET", "/summer", {}),
    ("GET", "/summer?sub1=zone%2042&source=pop&cost=0.002", {"Referer": "https://ref.example/a"}),
    ("GET", "/summer", {"User-Agent": "Mozilla/5.0 \xc3\xa9", "Host": "Tracker.Example:8443"}),
    ("GET", "/nosuch", {}),
    ("GET", "/summer", {"Sec-Purpose": "prefetch"}),
    ("HEAD", "/summer", {}),
    ("GET", "/summer/", {}),
    ("GET", "/summer?_lp=1", {}),
    ("GET", "/healthz", {}),
    ("GET", "/", {}),
    ("GET", "/summer/postback", {}),
]


@pytest.mark.parametrize(("method", "path", "headers"), CASES)
def test_a_campaign_url_is_answered_as_falcon_answers_it(urls, method, path, headers):
    assert answer(urls, path, method, headers)[:3] == answer(urls.app, path, method, headers)[:3]


def test_a_plain_click_is_answered_in_front_of_falcon_and_the_rest_handed_to_it(urls):
    from routes.click import ANSWERED

    status, headers, _, environ = answer(urls, "/summer")
    assert status == "302 Found" and ANSWERED not in environ  # Falcon never saw it.
    assert headers == [
        ("cache-control", "no-store"),
        ("location", f"https://offer.example/?click={SUBID}&s1="),
        ("content-length", "0"),
        ("content-type", "application/json"),
    ]
    status, _, _, environ = answer(urls, "/summer", headers={"Sec-Purpose": "prefetch"})
    assert status == "204 No Content" and environ[ANSWERED].steps  # Clicked here, answered by Falcon.
    assert ANSWERED not in answer(urls, "/healthz")[3]  # Never a click.


@pytest.mark.parametrize("raised", ["spool", "bug"])
def test_a_click_that_fails_is_answered_as_falcon_answers_it(urls, monkeypatch, raised):
    from models.clicks.refusals import SpoolUnwritable

    def track(campaign, visit, **kwargs):
        raise SpoolUnwritable("disk full") if raised == "spool" else RuntimeError("a bug")

    monkeypatch.setattr(urls.clicks.tracker, "track", track)
    fast, slow = answer(urls, "/summer"), answer(urls.app, "/summer")
    assert (
        fast[0]
        == slow[0]
        == ("503 Service Unavailable" if raised == "spool" else "500 Internal Server Error")
    )
    assert fast[1:3] == slow[1:3]


def test_a_fallback_answer_is_falcons(db, env):
    from app import build_tracker, create_worker_app
    from settings import load_settings

    fallback = load_settings({**env, "LANNER_FALLBACK_URL": "https://fallback.example/"})
    tracker = build_tracker(db, fallback)
    try:
        urls = create_worker_app(fallback, tracker=tracker)
        assert answer(urls, "/nosuch")[:3] == answer(urls.app, "/nosuch")[:3]
        assert answer(urls, "/nosuch")[0] == "302 Found"
    finally:
        tracker.close()
