"""Bulk edits of offers and streams in process, on a real migrated database: a preview showing each row's
before → after (or why its service refuses it) that changes nothing, an apply that changes every ticked
row in one transaction and audits each, a refused row stopping the whole apply, and who may do it."""

from __future__ import annotations

import html
import re
import urllib.parse

import pytest
import test_panel
from conftest import request
from test_panel import FORM, log_in
from test_panel_editor import token_of

make_panel, panel, users = test_panel.make_panel, test_panel.panel, test_panel.users
OFFERS = "/panel/offers/bulk"


@pytest.fixture
def catalogue(db, users):
    """Offers on old.example (two in campaign 1, shared with bert to edit) and one elsewhere; campaign 1
    has a redirect stream to old.example besides its offer stream."""
    from models.accounts.sharing import share_campaign
    from models.admin.services import add_stream, create_campaign, create_offer

    first = create_campaign(db, "First", "first", offer_url="https://old.example/a?s={subid}")
    create_offer(db, "Second", "https://old.example/b?s={subid}")
    create_offer(db, "Elsewhere", "https://other.example/?s={subid}")
    add_stream(db, first.id, name="Away", action="redirect", payload="https://old.example/away")
    share_campaign(db, first.id, "bert", may_edit=True)
    return first


def send(app, cookie, path, ids, **fields):
    token = token_of(request(app, path, {"Cookie": cookie})[2].decode())
    pairs = [("csrf_token", token), *(("ids", str(i)) for i in ids), *fields.items()]
    status, _, page = request(
        app, path, {**FORM, "Cookie": cookie}, "POST", urllib.parse.urlencode(pairs).encode()
    )
    return status, page.decode()


def changes(page: str) -> list[tuple[str, str, str, str]]:
    rows = re.findall(
        r'<tr class="bulk-change"><td>([^<]*)</td><td>(\w+)</td>'
        r"<td><code>([^<]*)</code></td><td><code>([^<]*)</code>",
        page,
    )
    return [tuple(row) for row in rows]


def urls(db) -> dict[str, str]:
    from models.tables.offer import Offer

    return {offer.name: offer.url for offer in Offer.select()}


def test_offers_urls_are_replaced_and_paused_after_a_preview_that_changes_nothing(panel, catalogue, db):
    from models.accounts.audit import list_audit

    cookie = log_in(panel)
    before = urls(db)
    status, page = send(
        panel,
        cookie,
        OFFERS,
        [1, 2, 3],
        do="preview",
        status="paused",
        find="old.example",
        replace="new.example",
    )
    assert status == 200, page
    assert changes(page) == [
        ("First", "status", "active", "paused"),
        ("First", "url", "https://old.example/a?s={subid}", "https://new.example/a?s={subid}"),
        ("Second", "status", "active", "paused"),
        ("Second", "url", "https://old.example/b?s={subid}", "https://new.example/b?s={subid}"),
        ("Elsewhere", "status", "active", "paused"),
    ]
    assert "Apply to 3 offers" in page and urls(db) == before  # A preview changes nothing.
    status, page = send(
        panel, cookie, OFFERS, [1, 2], do="apply", status="", find="old.example", replace="new.example"
    )
    assert status == 200 and "2 offers changed, each in the audit log." in page
    assert (
        urls(db)["First"] == "https://new.example/a?s={subid}"
        and urls(db)["Elsewhere"] == before["Elsewhere"]
    )
    audited = [e for e in list_audit(db, entity="offer") if e.action == "update"]
    assert sorted(e.entity_id for e in audited) == [1, 2] and {e.actor for e in audited} == {"anna"}
    status, page = send(panel, cookie, OFFERS, [1], do="preview", find="old.example")
    assert status == 200 and "no change" in page and 'id="bulk-apply"' not in page


def test_a_row_its_service_refuses_is_shown_and_stops_the_whole_apply(panel, catalogue, db):
    cookie = log_in(panel)
    before = urls(db)
    # Second's URL would lose its scheme; First's is fine: the preview says which, the apply changes none.
    fields = {"status": "paused", "find": "https://old.example/b", "replace": "old/b"}
    status, page = send(panel, cookie, OFFERS, [1, 2], do="preview", **fields)
    assert status == 200 and 'class="bulk-refused"><td>Second</td>' in page
    assert ("First", "status", "active", "paused") in changes(page)
    assert 'id="bulk-apply" disabled' in page
    status, page = send(panel, cookie, OFFERS, [1, 2], do="apply", **fields)
    assert status == 400 and "Nothing was changed." in page
    assert urls(db) == before
    from models.tables.offer import Offer

    assert Offer.get_by_id(1).status == "active"  # First's change went back with Second's refusal.


def test_streams_take_a_status_a_weight_and_a_redirect_target_in_one_go(panel, catalogue, db):
    from models.admin.services import list_streams

    cookie = log_in(panel, "bert")  # Shared to edit.
    path = f"/panel/campaigns/{catalogue.id}/streams/bulk"
    ids = [s.id for s in list_streams(db, catalogue.id)]
    fields = {"status": "disabled", "weight": "40", "find": "old.example", "replace": "new.example"}
    status, page = send(panel, cookie, path, ids, do="preview", **fields)
    assert status == 200, page
    assert ("Away", "url", "https://old.example/away", "https://new.example/away") in changes(page)
    status, page = send(panel, cookie, path, ids, do="apply", **fields)
    assert status == 200 and "2 streams changed" in page
    streams = list_streams(db, catalogue.id)
    assert {(s.status, s.weight) for s in streams} == {("disabled", 40)}
    assert [s.action_payload for s in streams if s.action == "redirect"] == ["https://new.example/away"]


def test_bad_bulk_input_and_rows_not_one_s_own_get_a_clear_4xx(panel, catalogue, db):
    from models.admin.services import create_campaign

    other = create_campaign(db, "Other", "other", offer_url="https://x.example/?s={subid}")
    cookie = log_in(panel)
    for fields, sentence in (
        ({"status": "gone"}, "The status is one of active, paused, archived."),
        ({}, "Choose a status, a weight or a text to find"),
        ({"replace": "x"}, "Say what to find"),
        ({"find": "x" * 2001}, "at most 2,000 characters"),
    ):
        status, page = send(panel, cookie, OFFERS, [1], do="preview", **fields)
        assert status == 400 and sentence in page, (fields, page[-800:])
    assert send(panel, cookie, OFFERS, [], do="preview", status="paused")[0] == 400
    assert send(panel, cookie, OFFERS, ["1x"], do="preview", status="paused")[0] == 400
    assert send(panel, cookie, OFFERS, list(range(1, 502)), do="preview", status="paused")[0] == 400
    assert send(panel, cookie, OFFERS, [99], do="preview", status="paused")[0] == 404
    path = f"/panel/campaigns/{catalogue.id}/streams/bulk"
    status, page = send(panel, cookie, path, [1], do="preview", weight="-3")
    assert status == 400 and "whole number from 0 to 1,000,000" in page
    status, page = send(panel, cookie, path, [1], do="preview", status="deleted")
    assert status == 400 and "The status is one of active, disabled." in page

    bert = log_in(panel, "bert")
    assert request(panel, f"/panel/campaigns/{other.id}/streams/bulk", {"Cookie": bert})[0] == 404
    other_stream = [
        s.id for s in __import__("models.admin.services").admin.services.list_streams(db, other.id)
    ]
    assert (
        send(
            panel,
            bert,
            f"/panel/campaigns/{catalogue.id}/streams/bulk",
            other_stream,
            do="preview",
            status="disabled",
        )[0]
        == 404
    )
    vera = log_in(panel, "vera")  # A viewer changes nothing.
    assert request(panel, OFFERS, {"Cookie": vera})[0] == 403
    assert request(panel, f"/panel/campaigns/{catalogue.id}/streams/bulk", {"Cookie": vera})[0] in (403, 404)


def back_link(page: str) -> str:
    return html.unescape(re.search(r'<p><a href="([^"]*)">←', page).group(1))


def test_the_link_back_from_a_bulk_edit_shows_the_list_as_it_was_left(panel, catalogue, db):
    cookie = log_in(panel)
    shown = "period=last_7_days&status=all&q=old&sort=-name,status"
    offers = request(panel, f"/panel/offers?{shown}", {"Cookie": cookie})[2].decode()
    link = html.unescape(re.search(r'<a href="([^"]*)" id="bulk-offers">', offers).group(1))
    assert link == f"{OFFERS}?{shown}"
    assert back_link(request(panel, link, {"Cookie": cookie})[2].decode()) == f"/panel/offers?{shown}"
    # The form posts to the page's own URL: after a preview and an apply the way back is still the list's.
    status, page = send(panel, cookie, link, [2], do="preview", status="paused")
    assert status == 200 and back_link(page) == f"/panel/offers?{shown}"
    status, page = send(panel, cookie, link, [2], do="apply", status="paused")
    assert status == 200 and "1 offers changed" in page and back_link(page) == f"/panel/offers?{shown}"
    # The query is the list's only: it cannot lead the link anywhere but to the list.
    sneaky = request(panel, f"{OFFERS}?%2F%2Fevil.example%2F=1", {"Cookie": cookie})[2].decode()
    assert back_link(sneaky) == "/panel/offers?%2F%2Fevil.example%2F=1"
    assert back_link(request(panel, OFFERS, {"Cookie": cookie})[2].decode()) == "/panel/offers"

    editor = f"/panel/campaigns/{catalogue.id}"
    period = "period=custom&from=2026-11-01&to=2026-11-30"
    page = request(panel, f"{editor}?{period}", {"Cookie": cookie})[2].decode()
    link = html.unescape(re.search(r'<a href="([^"]*)" id="bulk-streams">', page).group(1))
    assert link == f"{editor}/streams/bulk?{period}"
    status, page = send(panel, cookie, link, [1], do="apply", weight="7")
    assert status == 200 and back_link(page) == f"{editor}?{period}"
