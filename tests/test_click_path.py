"""The decision path stored with each click (models/routing/path.py) and said in words
(models/reporting/clickpath.py): every kind of decision recorded by the router and the flusher, kept in
the columnar history, and a spool line of the release before it still landing as "not recorded".
In-process trackers on a real migrated store (both backends), one flush per test."""

from __future__ import annotations

import pytest
from landers import lander_campaign

from models.admin.services import add_stream, create_campaign, create_offer, update_stream
from models.clicks.record import encode_line, line_tail, new_subid
from models.clicks.spool import flush_spool
from models.clicks.visit import Visit
from models.reporting.clicklog import ClickFilter, list_clicks, stored_click
from models.reporting.clickpath import NOT_RECORDED
from models.reporting.history import HistoryFiles, append_history
from models.reporting.historyclicks import ClickHistory
from models.routing.path import Step, origin_of, read_path, with_flushed_steps
from models.store.database import db as database
from models.store.database import write_tx
from models.tables.campaign import Stream
from models.tables.click import Click

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"


def visit(n: int, ua: str = CHROME, **fields) -> Visit:
    return Visit(ip=f"198.51.100.{n}", user_agent=ua, **fields)


def offer(db, name: str) -> int:
    return create_offer(db, name, f"https://{name.lower()}.example/go?c={{subid}}").id


def only_stream(db, campaign, **fields) -> None:
    update_stream(db, Stream.get(Stream.campaign == campaign.id).id, **fields)


def paths(settings) -> dict[str, dict]:
    flush_spool(database, settings.spool_dir, settings.spool_segment_bytes)
    return {row["subid"]: row for row in list_clicks(database, ClickFilter(limit=100))}


def test_every_kind_of_decision_records_its_path_and_says_it_in_words(db, make_tracker, settings, clock):
    push, capped, rest = offer(db, "Push"), offer(db, "Capped"), offer(db, "Rest")
    only_stream(db, create_campaign(db, "Trace", "trace", offer_id=capped), name="Daily", daily_cap=1)
    add_stream(
        db,
        "trace",
        name="Shoes push",
        type="intercepting",
        offers=[(push, 100)],
        filters=["keyword=shoes", "param.utm_source=push"],
    )
    add_stream(db, "trace", name="Boots", type="fallback", offers=[(rest, 100)], filters=["keyword=boots"])
    guard = create_campaign(db, "Guard", "guard", offer_id=push, default_action="blank")
    only_stream(db, guard, name="Humans", filters=["bot=no"])
    left, right = offer(db, "Left"), offer(db, "Right")
    both = [(left, 50), (right, 50)]
    weighted = create_campaign(db, "Weighted", "weighted", offer_id=left, rotation="weight")
    only_stream(db, weighted, name="A", offers=both)
    add_stream(db, "weighted", name="B", offers=both)
    bandit = create_campaign(db, "Bandit", "bandit", offer_id=left)
    only_stream(db, bandit, name="Arms", offers=both, offer_rotation="bandit_cr")
    landed = lander_campaign(db, "funnel", [{"url": "https://lp.example/p?go={offer}", "name": "Summer"}])

    tracker = make_tracker()
    trace, guard = tracker.campaign("trace"), tracker.campaign("guard")
    matched = tracker.track(trace, visit(1, keyword="shoes", params={"utm_source": "push"}))
    to_next = tracker.track(trace, visit(2, keyword="shoes"))  # Its second filter fails: the next stream.
    to_fallback = tracker.track(trace, visit(3, keyword="boots"))  # Daily took one: capped.
    to_default = tracker.track(trace, visit(4, keyword="sandals"))
    bot_by_flusher = tracker.track(trace, visit(5, ua=GOOGLEBOT))
    bot_by_route = tracker.track(guard, visit(6, ua=GOOGLEBOT))
    by_weight = tracker.track(tracker.campaign("weighted"), visit(7))
    by_bandit = tracker.track(tracker.campaign("bandit"), visit(8))
    sent = tracker.track(tracker.campaign("funnel"), visit(9, host="t.example", domain="t.example"))
    clock.advance(5)
    assert tracker.lp_click(sent.subid) is not None
    assert to_default.answer == "not_found" and bot_by_route.answer == "blank"

    rows = paths(settings)
    said = {subid: rows[subid]["path"] for subid in rows}
    assert said[matched.subid] == (
        "intercepting stream 'Shoes push' (filters: keyword=shoes ✓, param.utm_source=push ✓)"
        " → offer 'Push' → 302 https://push.example/…"
    )
    assert said[to_next.subid] == (
        "intercepting stream 'Shoes push' did not match (filters: keyword=shoes ✓, param.utm_source=push ✗)"
        " → stream 'Daily' (no filters) → offer 'Capped' → 302 https://capped.example/…"
    )
    assert said[to_fallback.subid] == (
        "intercepting stream 'Shoes push' did not match (filters: keyword=shoes ✗)"
        " → stream 'Daily': cap 'daily 1' reached"
        " → fallback stream 'Boots' (filters: keyword=boots ✓) → offer 'Rest' → 302 https://rest.example/…"
    )
    assert said[to_default.subid].endswith(
        "→ fallback stream 'Boots' did not match (filters: keyword=boots ✗)"
        " → no stream took it → default action 404"
    )
    assert said[bot_by_flusher.subid].startswith("bot: crawler: Googlebot → intercepting stream 'Shoes push'")
    assert said[bot_by_flusher.subid].endswith("default action 404")
    assert rows[bot_by_flusher.subid]["is_bot"] == 1
    assert said[bot_by_route.subid] == (
        "bot: crawler: Googlebot → stream 'Humans' did not match (filters: bot=no ✗)"
        " → no stream took it → default action blank page"
    )
    picked = "'Left'" if by_weight.offer_id == left else "'Right'"
    assert said[by_weight.subid].startswith("weighted pick → stream '")
    assert said[by_weight.subid].endswith(
        f"(no filters) → weighted pick → offer {picked} → 302 https://{picked[1:-1].lower()}.example/…"
    )
    assert " → bandit pick → offer '" in said[by_bandit.subid]
    assert rows[sent.subid]["offer_id"] == landed["offer_ids"][0]  # Chosen at its LP click.
    assert said[sent.subid].endswith(
        " (no filters) → lander 'Summer' → 302 https://lp.example/… → LP click → offer 'funnel offer 0'"
    )

    # `lanner click show` and the API's click: the same words, from the row store and from the history.
    shown = stored_click(database, to_fallback.subid, geo_path=settings.geo_path)
    assert shown["path"] == said[to_fallback.subid]
    files = HistoryFiles(settings.history_path, settings.history_memory_limit)
    assert append_history(database, files).copied == len(rows)
    with write_tx(database):
        Click.delete().where(Click.subid == bot_by_route.subid).execute()  # As LANNER_RAW_RETENTION would.
    old = stored_click(database, bot_by_route.subid, geo_path=settings.geo_path, history=ClickHistory(files))
    assert "kept" in old and old["path"] == said[bot_by_route.subid]


def test_a_line_of_the_release_before_the_path_lands_and_says_not_recorded(db, settings):
    create_campaign(db, "Old", "old", offer_url="https://o.example/")
    texts = [
        GOOGLEBOT,
        "",
        "",
        "",
        *[""] * 30,
        *["", "", "", "", "", "", "", "", "1+ o1"],
        "https://o.example/",
    ]
    subid = new_subid()
    tail = line_tail(subid, 1, 1, 1, 0.0, -1, texts)  # Its bot check left to the flusher.
    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.spool_dir / "clicks.00000001.log", "ab") as journal:
        journal.write(encode_line("192.0.2.1", 7, 1_800_000_000_000, (1, 1, 1), tail))
    row = paths(settings)[subid]
    assert (row["route"], row["is_bot"], row["path"]) == ("1+ o1", 1, NOT_RECORDED)


@pytest.mark.parametrize(
    ("location", "origin"),
    [
        ("https://offer.example/go?c=1", "https://offer.example"),
        ("http://user:secret@offer.example:8080?x=1", "http://offer.example:8080"),
        ("/landers/shoe/?subid=x", ""),
        ("https://a b.example/", "https://a%20b.example"),
    ],
)
def test_the_origin_keeps_only_scheme_and_host(location, origin):
    assert origin_of(location) == origin


def test_the_flusher_adds_origin_and_bot_reason_only_to_a_recorded_path():
    # A stream's own URL (or a default action's) keeps its origin; an offer's is named by its step.
    assert (
        with_flushed_steps("3+ =h", "https://x.example/a", "ip list") == "3+ =h @https://x.example !ip%20list"
    )
    assert with_flushed_steps("3+ o1 =h", "https://x.example/a", None) == "3+ o1 =h"
    assert with_flushed_steps("3+ l2 =h", "https://lp.example/a", None) == "3+ l2 =h"
    assert with_flushed_steps("3+ o1", "https://x.example/a", "ip list") == "3+ o1"  # An old release's.
    assert with_flushed_steps("=n", "", None) == "=n"
    assert read_path("3+ o1") is None
    assert read_path("4-1 w 3+2 t o1 =j @https://x.example !crawler:%20Bing") == [
        Step("stream", 4, "no match", 1),
        Step("pick", text="weight"),
        Step("stream", 3, "matched", 2),
        Step("pick", text="bandit"),
        Step("offer", 1),
        Step("answer", text="js"),
        Step("origin", text="https://x.example"),
        Step("bot", text="crawler: Bing"),
    ]
