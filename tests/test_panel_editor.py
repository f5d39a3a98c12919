"""The campaign editor (/panel/campaigns/new, /panel/campaigns/{id} and its streams) in process, on a real
migrated database: create, settings with their errors, streams with the filter builder and weighted
offers, remove, reorder, roles, CSRF and escaping. tests/test_panel_browser_editor.py drags in a browser."""

from __future__ import annotations

import re

import pytest
import test_panel
from test_panel import get, log_in, post

# The panel fixtures of tests/test_panel.py, shared (assigned, not imported: the names are parameters below).
make_panel, panel, users = test_panel.make_panel, test_panel.panel, test_panel.users

NEW_OFFER = "https://offer.example/?click={subid}"


def token_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def form_token(app, cookie, path="/panel/campaigns"):
    return token_of(get(app, path, cookie)[2])


def post_form(app, path, fields, cookie):
    """A form post as a browser sends it: a list of pairs keeps repeated fields (the filter rows)."""
    import urllib.parse

    from conftest import request

    body = urllib.parse.urlencode(fields).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    status, headers, answer = request(app, path, headers, "POST", body)
    return status, headers, answer.decode()


@pytest.fixture
def campaign(db):
    """Campaign 1 `spring` with its default stream to offer 1, and two more offers (2 capped)."""
    from models.admin.services import create_campaign, create_offer

    created = create_campaign(db, "Spring", "spring", offer_url="https://a.example/?s={subid}")
    create_offer(db, "Offer B", "https://b.example/?s={subid}", daily_cap=500, total_cap=9000)
    create_offer(db, "Offer C", "https://c.example/?s={subid}")
    return created


def stream_fields(token, filters=(), offers=(), **fields):
    """The stream form's pairs: `filters` as (type, key, op, value) rows, then the blank rows a page has."""
    pairs = [("csrf_token", token)]
    defaults = {
        "name": "",
        "type": "regular",
        "weight": "100",
        "action": "offers",
        "payload": "",
        "filter_mode": "and",
        "offer_rotation": "weight",
        "redirect_type": "http",
        "fallback_offer_id": "",
        "daily_cap": "",
        "total_cap": "",
    }
    pairs += list({**defaults, **fields}.items())
    for row in [*filters, ("", "", "=", ""), ("", "", "=", "")]:
        pairs += list(zip(("filter_type", "filter_key", "filter_op", "filter_value"), row, strict=True))
    pairs += [(f"offer_{offer_id}", str(weight)) for offer_id, weight in offers]
    return pairs


def audit_actors(db, entity):
    from models.accounts.audit import list_audit

    return [(entry.actor, entry.action) for entry in list_audit(db, entity=entity)]


# -- create ---------------------------------------------------------------------------------------


def test_an_admin_creates_a_campaign_and_lands_in_its_editor_with_its_url_to_copy(panel, users, db):
    from models.admin.services import get_campaign, list_streams, stream_offers

    cookie = log_in(panel)
    listing = get(panel, "/panel/campaigns", cookie)[2]
    assert 'href="/panel/campaigns/new"' in listing
    status, _, page = get(panel, "/panel/campaigns/new", cookie)
    assert status == 200 and 'name="alias"' in page
    fields = {
        "csrf_token": token_of(page),
        "name": "Summer",
        "alias": "summer",
        "rotation": "weight",
        "uniqueness_hours": "12",
        "timezone": "Europe/Berlin",
        "default_action": "not_found",
        "cost_model": "cpc",
        "cost_value": "0.05",
        "cost_currency": "",
        "offer": "new",
        "offer_url": NEW_OFFER,
        "bind_visitor": "1",
        "owner_id": "",
    }
    status, headers, _ = post(panel, "/panel/campaigns/new", fields, cookie=cookie)
    created = get_campaign(db, "summer")
    assert status == 303 and headers["location"] == f"/panel/campaigns/{created.id}"
    assert (created.rotation, created.uniqueness_hours, created.timezone) == ("weight", 12.0, "Europe/Berlin")
    assert created.cost_value == 0.05 and created.bind_visitor == 1 and created.owner_id == users["anna"].id
    [stream] = list_streams(db, created.id)
    assert len(stream_offers(db, stream)) == 1
    assert ("anna", "create") in audit_actors(db, "campaign")
    status, _, page = get(panel, headers["location"], cookie)
    assert status == 200 and 'value="http://127.0.0.1/summer"' in page and 'class="copy"' in page
    assert f'hx-get="/panel/campaigns/{created.id}/simulate"' in page
    listing = get(panel, "/panel/campaigns", cookie)[2]
    assert f'<a href="/panel/campaigns/{created.id}">Summer</a>' in listing


def test_a_refused_create_shows_the_sentence_and_keeps_what_was_typed(panel, users, db, campaign):
    from models.admin.services import list_campaigns

    cookie = log_in(panel)
    token = form_token(panel, cookie, "/panel/campaigns/new")
    base = {"csrf_token": token, "name": "Again", "offer": "new", "offer_url": NEW_OFFER}
    for changes, sentence in (
        ({"alias": "spring"}, "A campaign with alias &#39;spring&#39; already exists."),
        ({"alias": "panel"}, "must be 1-64 letters"),
        (
            {"alias": "fine", "uniqueness_hours": "a day"},
            "The uniqueness window must be a number, not &#39;a day&#39;.",
        ),
        (
            {"alias": "fine", "offer": "", "offer_url": ""},
            "Give exactly one of an offer URL or an existing offer id.",
        ),
        ({"alias": "fine", "name": " "}, "A campaign needs a name."),
    ):
        status, _, body = post(panel, "/panel/campaigns/new", {**base, **changes}, cookie=cookie)
        page = body.decode()
        assert status == 400 and sentence in page, page
        assert f'value="{changes["alias"]}"' in page
    assert [c.alias for c in list_campaigns(db)] == ["spring"]
    # An existing offer instead of a new one.
    status, _, _ = post(
        panel, "/panel/campaigns/new", {**base, "alias": "again", "offer": "2"}, cookie=cookie
    )
    from models.admin.services import list_streams, stream_offers

    assert status == 303 and stream_offers(db, list_streams(db, "again")[0]) == [(2, 100)]


# -- settings -------------------------------------------------------------------------------------


def settings_form(token, **changes):
    return {
        "csrf_token": token,
        "name": "Spring",
        "alias": "spring",
        "status": "active",
        "rotation": "position",
        "uniqueness_hours": "24",
        "timezone": "UTC",
        "default_action": "not_found",
        "default_url": "",
        "cost_model": "cpc",
        "cost_value": "0",
        "cost_currency": "USD",
        "owner_id": "",
        **changes,
    }


def test_settings_are_saved_through_update_campaign_and_its_errors_shown_next_to_the_form(
    panel, users, db, campaign
):
    from models.admin.services import get_campaign

    cookie = log_in(panel)
    token = form_token(panel, cookie, "/panel/campaigns/1")
    for changes, sentence in (
        (
            {"cost_model": "revshare", "cost_value": "150"},
            "A revshare cost is a percentage of revenue, from 0 to 100.",
        ),
        ({"timezone": "Mars/Olympus"}, "Unknown timezone &#39;Mars/Olympus&#39;"),
        ({"default_action": "redirect"}, "A redirect default action needs"),
        ({"cost_currency": "EURO"}, "is not a three-letter code"),  # One without a rate is warned of only.
    ):
        status, _, body = post(panel, "/panel/campaigns/1", settings_form(token, **changes), cookie=cookie)
        page = body.decode()
        assert status == 400 and '<p class="error" role="alert">' in page and sentence in page, page
        assert 'id="campaign-form"' in page and "Campaign URL" in page
    assert get_campaign(db, 1).cost_model == "cpc" and get_campaign(db, 1).timezone == "UTC"
    changes = {
        "name": "Spring 2",
        "alias": "spring2",
        "status": "paused",
        "timezone": "America/New_York",
        "default_action": "redirect",
        "default_url": "https://d.example/",
        "cost_model": "cpm",
        "cost_value": "2.5",
        "owner_id": str(users["bert"].id),
    }
    status, headers, _ = post(panel, "/panel/campaigns/1", settings_form(token, **changes), cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/campaigns/1?saved_settings=1"
    saved = get_campaign(db, 1)
    assert (saved.name, saved.alias, saved.status, saved.timezone) == (
        "Spring 2",
        "spring2",
        "paused",
        "America/New_York",
    )
    assert (saved.default_payload, saved.cost_model, saved.cost_value) == ("https://d.example/", "cpm", 2.5)
    assert saved.owner_id == users["bert"].id and saved.bind_visitor == 0
    assert audit_actors(db, "campaign")[0] == ("anna", "update")
    assert "Settings saved." in get(panel, headers["location"], cookie)[2]
    # No owner chosen: owned by nobody again.
    post(panel, "/panel/campaigns/1", settings_form(token, alias="spring2"), cookie=cookie)
    assert get_campaign(db, 1).owner_id is None


# -- streams --------------------------------------------------------------------------------------


def test_a_stream_with_filters_of_every_kind_and_weighted_offers_is_added(panel, users, db, campaign):
    from models.admin.services import describe_filters, list_streams, stream_offers

    cookie = log_in(panel)
    page = get(panel, "/panel/campaigns/1/streams/new", cookie)[2]
    from models.routing.filters import FILTER_NAMES
    from routes.panel.editor import FILTER_HINTS, FILTER_LABELS

    # A filter type added to models/routing/filters.py needs its row in the builder.
    assert set(FILTER_HINTS) == set(FILTER_LABELS) == set(FILTER_NAMES) and len(FILTER_NAMES) == 20
    for name in FILTER_NAMES:
        assert f'<option value="{name}"' in page, name
    assert page.count('name="filter_type"') == 3 + 1  # Three blank rows and the template's.
    assert 'name="offer_2"' in page and ">500</td>" in page and ">9,000</td>" in page  # Offer B's caps.
    filters = [
        ("country", "", "=", "US,GB"),
        ("device", "", "!=", "desktop"),
        ("param", "utm_source", "=", "fb"),
        ("sub_id", "3", "~", "promo"),
        ("ip", "", "=", "10.0.0.0/8, 2001:db8::/32"),
        ("city", "", "=", '"Washington, D.C.",London'),
        ("referrer", "", "~", "/fb|ig/"),
        ("schedule", "", "=", "mon-fri 09:00-18:00"),
        ("date", "", "=", "2026-12-01..2026-12-31"),
        ("unique", "", "=", "campaign"),
        ("bot", "", "=", "no"),
    ]
    fields = stream_fields(
        token_of(page),
        filters,
        [(2, 70), (3, 30)],
        name="US mobile",
        type="intercepting",
        filter_mode="or",
        daily_cap="100",
    )
    status, headers, body = post_form(panel, "/panel/campaigns/1/streams/new", fields, cookie)
    assert status == 303, body
    stream = list_streams(db, 1)[0]
    assert headers["location"] == f"/panel/campaigns/1?saved={stream.id}#streams"
    assert (stream.name, stream.type, stream.filter_mode, stream.daily_cap) == (
        "US mobile",
        "intercepting",
        "or",
        100,
    )
    assert describe_filters(stream) == [
        "country=US,GB",
        "device!=desktop",
        "param.utm_source=fb",
        "sub_id_3~promo",
        "ip=10.0.0.0/8,2001:db8::/32",
        'city="Washington, D.C.",London',
        "referrer~/fb|ig/",
        "schedule=mon-fri 09:00-18:00",
        "date=2026-12-01..2026-12-31",
        "unique=campaign",
        "bot=no",
    ]
    assert sorted(stream_offers(db, stream)) == [(2, 70), (3, 30)]
    assert ("anna", "create") in audit_actors(db, "stream")
    # The editor lists it first (intercepting), with each offer's share; its form shows the rows back.
    editor = get(panel, headers["location"].partition("#")[0], cookie)[2]
    assert f"Stream {stream.id} saved." in editor and "70.0%" in editor and "30.0%" in editor
    form = get(panel, f"/panel/campaigns/1/streams/{stream.id}", cookie)[2]
    assert 'value="utm_source"' in form and 'value="3"' in form and 'value="mon-fri 09:00-18:00"' in form
    assert 'value="&#34;Washington, D.C.&#34;,London"' in form and "70.0%" in form


def test_an_invalid_filter_answers_the_parser_s_sentence_next_to_its_row_and_saves_nothing(
    panel, users, db, campaign
):
    from models.admin.services import list_streams

    cookie = log_in(panel)
    token = form_token(panel, cookie, "/panel/campaigns/1/streams/new")
    filters = [
        ("country", "", "=", "US"),
        ("country", "", "~", "US"),
        ("sub_id", "", "=", "x"),
        ("param", "", "=", "fb"),
        ("schedule", "", "=", "someday"),
    ]
    status, _, page = post_form(
        panel, "/panel/campaigns/1/streams/new", stream_fields(token, filters, [(1, 1)]), cookie
    )
    assert status == 400 and len(list_streams(db, 1)) == 1
    rows = re.findall(r'<div class="filter-row" data-filter-row>(.*?)</div>', page, re.S)
    errors = [re.search(r'class="error row-error" role="alert">(.*?)</p>', row, re.S) for row in rows]
    assert errors[0] is None
    assert "The country filter takes = or !=, not ~" in errors[1].group(1)
    assert errors[2].group(1) == "A sub_id filter needs its slot, 1 to 30."
    assert "A param filter needs the parameter name" in errors[3].group(1)
    assert errors[4] is not None and 'value="someday"' in rows[4]
    # Offers: an offers stream needs one, and a weight is a whole number.
    status, _, page = post_form(panel, "/panel/campaigns/1/streams/new", stream_fields(token), cookie)
    assert status == 400 and "needs at least one offer" in page
    status, _, page = post_form(
        panel, "/panel/campaigns/1/streams/new", stream_fields(token, offers=[(2, "lots")]), cookie
    )
    assert status == 400 and "Offer 2&#39;s weight must be a whole number" in page and 'value="lots"' in page
    for cap, sentence in (
        ("--5", "The daily cap must be a whole number"),
        ("-5", "A daily cap cannot be negative."),
    ):
        fields = stream_fields(token, offers=[(1, 1)], daily_cap=cap)
        status, _, page = post_form(panel, "/panel/campaigns/1/streams/new", fields, cookie)
        assert status == 400 and sentence in page
    assert len(list_streams(db, 1)) == 1


def test_editing_a_stream_replaces_its_filters_offers_caps_and_fallback(panel, users, db, campaign):
    from models.admin.services import add_stream, describe_filters, get_stream, stream_offers

    added = add_stream(
        db,
        1,
        offers=[(1, 50), (2, 50)],
        filters=["country=US"],
        daily_cap=10,
        total_cap=20,
        fallback_offer_id=3,
    )
    cookie = log_in(panel)
    path = f"/panel/campaigns/1/streams/{added.id}"
    token = form_token(panel, cookie, path)
    fields = stream_fields(token, [], [(3, 5)], total_cap="40", status="disabled")
    status, _, body = post_form(panel, path, fields, cookie)
    assert status == 303, body
    stream = get_stream(db, added.id)
    assert describe_filters(stream) == [] and stream_offers(db, stream) == [(3, 5)]
    assert (stream.daily_cap, stream.total_cap, stream.fallback_offer_id, stream.status) == (
        None,
        40,
        None,
        "disabled",
    )
    assert audit_actors(db, "stream")[0] == ("anna", "update")
    # A redirect stream takes its URL; an unknown stream of the campaign is 404.
    fields = stream_fields(
        token, [("referrer", "", "=", "")], action="redirect", payload="https://r.example/?s={subid}"
    )
    assert post_form(panel, path, fields, cookie)[0] == 303
    stream = get_stream(db, added.id)
    assert (stream.action, stream.action_payload, describe_filters(stream)) == (
        "redirect",
        "https://r.example/?s={subid}",
        ["referrer="],
    )
    assert get(panel, "/panel/campaigns/1/streams/999", cookie)[0] == 404


def test_streams_are_removed_and_reordered_by_the_posted_order_or_an_up_button(panel, users, db, campaign):
    from models.admin.services import add_stream, list_streams

    second = add_stream(db, 1, name="second", offers=[(2, 1)])
    third = add_stream(db, 1, name="third", offers=[(3, 1)])
    first = list_streams(db, 1)[0]
    interceptor = add_stream(db, 1, type="intercepting", action="not_found")
    cookie = log_in(panel)
    page = get(panel, "/panel/campaigns/1", cookie)[2]
    token = token_of(page)
    assert [s.id for s in list_streams(db, 1)] == [interceptor.id, first.id, second.id, third.id]
    # Without JavaScript: the up button of `third` posts the order with it above `second`.
    up = re.search(
        rf'name="order" value="([\d,]+)">\s*<button type="submit" class="move" title="Move up" '
        rf'aria-label="Move stream {third.id} up"',
        page,
    )
    status, headers, _ = post(
        panel, "/panel/campaigns/1/streams/order", {"csrf_token": token, "order": up.group(1)}, cookie=cookie
    )
    assert status == 303 and headers["location"] == "/panel/campaigns/1#streams"
    assert [s.id for s in list_streams(db, 1)] == [interceptor.id, first.id, third.id, second.id]
    order = f"{interceptor.id},{second.id},{first.id},{third.id}"
    assert (
        post(panel, "/panel/campaigns/1/streams/order", {"csrf_token": token, "order": order}, cookie=cookie)[
            0
        ]
        == 303
    )
    assert [s.id for s in list_streams(db, 1)] == [interceptor.id, second.id, first.id, third.id]
    for bad in (f"{first.id},{second.id}", "1,x", ""):
        status, _, body = post(
            panel, "/panel/campaigns/1/streams/order", {"csrf_token": token, "order": bad}, cookie=cookie
        )
        assert status == 400 and (b"List every stream" in body or b"a list of stream ids" in body)
    path = f"/panel/campaigns/1/streams/{second.id}/remove"
    assert post(panel, path, {"csrf_token": token}, cookie=cookie)[0] == 303
    assert [s.id for s in list_streams(db, 1)] == [interceptor.id, first.id, third.id]
    assert audit_actors(db, "stream")[0] == ("anna", "remove")
    assert post(panel, path, {"csrf_token": token}, cookie=cookie)[0] == 404


def test_a_saved_stream_s_geo_filters_the_geo_files_cannot_answer_are_warned_about(
    panel, users, db, campaign
):
    cookie = log_in(panel)
    token = form_token(panel, cookie, "/panel/campaigns/1/streams/new")
    fields = stream_fields(token, [("city", "", "=", "London")], [(1, 1)])
    status, headers, _ = post_form(panel, "/panel/campaigns/1/streams/new", fields, cookie)
    page = get(panel, headers["location"].partition("#")[0], cookie)[2]
    assert status == 303 and re.search(
        r'<p class="note">Stream \d+&#39;s city filter sees every click&#39;s city as unknown', page
    )


# -- roles ----------------------------------------------------------------------------------------


def test_a_viewer_sees_the_editor_read_only_and_every_write_is_refused(panel, users, db, campaign):
    from models.accounts.sharing import share_campaign
    from models.admin.services import get_campaign, list_streams

    share_campaign(db, 1, "vera")
    viewer = log_in(panel, "vera")
    page = get(panel, "/panel/campaigns/1", viewer)[2]
    assert "read-only" in page and "<fieldset disabled>" in page
    assert 'method="post" action="/panel/campaigns/1' not in page and "Add a stream" not in page
    assert (
        'draggable="true"' not in page
        and 'href="/panel/campaigns/new"' not in get(panel, "/panel/campaigns", viewer)[2]
    )
    stream_page = get(panel, f"/panel/campaigns/1/streams/{list_streams(db, 1)[0].id}", viewer)[2]
    assert "<fieldset disabled>" in stream_page and 'id="save-stream"' not in stream_page
    token = token_of(get(panel, "/panel", viewer)[2])
    stream_id = list_streams(db, 1)[0].id
    for path, fields in (
        ("/panel/campaigns/1", settings_form(token, name="Mine")),
        ("/panel/campaigns/1/streams/new", stream_fields(token, offers=[(1, 1)])),
        (f"/panel/campaigns/1/streams/{stream_id}", stream_fields(token, offers=[(1, 1)])),
        (f"/panel/campaigns/1/streams/{stream_id}/remove", {"csrf_token": token}),
        ("/panel/campaigns/1/streams/order", {"csrf_token": token, "order": str(stream_id)}),
    ):
        assert (
            post_form(panel, path, fields if isinstance(fields, list) else list(fields.items()), viewer)[0]
            == 403
        ), path
    assert get(panel, "/panel/campaigns/new", viewer)[0] == 403
    assert (
        post(panel, "/panel/campaigns/new", {"csrf_token": token, "name": "x", "alias": "x"}, cookie=viewer)[
            0
        ]
        == 403
    )
    assert get_campaign(db, 1).name == "Spring" and len(list_streams(db, 1)) == 1


def test_a_buyer_edits_their_own_reads_a_read_only_share_and_never_sees_others(panel, users, db, campaign):
    from models.accounts.sharing import share_campaign
    from models.admin.services import create_campaign, get_campaign

    create_campaign(db, "Theirs", "theirs", offer_id=1)  # Campaign 2: nobody's, not shared.
    create_campaign(db, "Shared", "shared", offer_id=1)  # Campaign 3: shared read-only.
    share_campaign(db, 3, "bert")
    buyer = log_in(panel, "bert")
    token = form_token(panel, buyer)
    assert get(panel, "/panel/campaigns/2", buyer)[0] == 404
    assert post(panel, "/panel/campaigns/2", settings_form(token, alias="theirs"), cookie=buyer)[0] == 404
    assert get(panel, "/panel/campaigns/2/streams/new", buyer)[0] == 404
    status, _, page = get(panel, "/panel/campaigns/3", buyer)
    assert status == 200 and "<fieldset disabled>" in page
    assert post(panel, "/panel/campaigns/3", settings_form(token, alias="shared"), cookie=buyer)[0] == 403
    # A buyer creates campaigns, which they then own and edit.
    fields = {"csrf_token": token, "name": "Bert's", "alias": "berts", "offer": "1", "owner_id": "1"}
    assert post(panel, "/panel/campaigns/new", fields, cookie=buyer)[0] == 303
    mine = get_campaign(db, "berts")
    assert mine.owner_id == users["bert"].id  # An owner field from a buyer is not theirs to set.
    page = get(panel, f"/panel/campaigns/{mine.id}", buyer)[2]
    assert 'id="save-campaign"' in page and 'name="owner_id"' not in page
    assert (
        post(
            panel,
            f"/panel/campaigns/{mine.id}",
            settings_form(token, name="Renamed", alias="berts"),
            cookie=buyer,
        )[0]
        == 303
    )
    assert (
        get_campaign(db, "berts").name == "Renamed" and get_campaign(db, "berts").owner_id == users["bert"].id
    )
    assert ("bert", "update") in audit_actors(db, "campaign")


def test_a_buyer_picks_and_posts_only_offers_it_may_use(panel, users, db, campaign):
    from models.admin.services import (
        create_campaign,
        create_offer,
        list_campaigns,
        list_streams,
        stream_offers,
    )

    create_campaign(db, "Frugal's", "frugals", offer_id=3, owner_id=users["frugal"].id)  # Offer 3: theirs.
    berts = create_campaign(db, "Bert's", "berts", offer_id=2, owner_id=users["bert"].id)
    create_offer(db, "Unused", "https://d.example/?s={subid}")  # Offer 4: no campaign's yet.
    buyer = log_in(panel, "bert")

    def offered(path, pattern):
        return sorted(int(n) for n in re.findall(pattern, get(panel, path, buyer)[2]))

    assert offered("/panel/campaigns/new", r'<option value="(\d+)"') == [2, 4]
    stream_page = f"/panel/campaigns/{berts.id}/streams/new"
    assert offered(stream_page, r'name="offer_(\d+)"') == [2, 4]
    assert offered(stream_page, r'<option value="(\d+)"[^>]*>[^<]*\(#') == [2, 4]  # The fallback offer.
    # A forged post naming another buyer's offer is refused as one that does not exist; nothing saved.
    token = form_token(panel, buyer)
    fields = {"csrf_token": token, "name": "Forged", "alias": "forged", "offer": "3"}
    status, _, body = post(panel, "/panel/campaigns/new", fields, cookie=buyer)
    assert status == 400 and "There is no offer 3." in body.decode()
    status, _, page = post_form(panel, stream_page, stream_fields(token, offers=[(3, 100)]), buyer)
    assert status == 400 and "needs at least one offer with a weight" in page  # offer_3 is not read.
    forged = stream_fields(token, offers=[(2, 100)], fallback_offer_id="3")
    status, _, page = post_form(panel, stream_page, forged, buyer)
    assert status == 400 and "There is no offer 3." in page
    stream = list_streams(db, berts.id)[0]
    status, _, page = post_form(
        panel,
        f"/panel/campaigns/{berts.id}/streams/{stream.id}",
        stream_fields(token, offers=[(3, 100)]),
        buyer,
    )
    assert status == 400 and stream_offers(db, list_streams(db, berts.id)[0]) == [(2, 100)]
    assert [c.alias for c in list_campaigns(db)] == ["spring", "frugals", "berts"] and len(
        list_streams(db, berts.id)
    ) == 1
    # An admin picks from every offer.
    admin = log_in(panel)
    assert re.findall(r'name="offer_(\d+)"', get(panel, stream_page, admin)[2]) == ["1", "2", "3", "4"]


def test_a_user_who_hides_money_has_no_cost_fields_and_keeps_the_campaign_s_cost(panel, users, db, campaign):
    from models.admin.services import get_campaign, update_campaign

    update_campaign(db, 1, cost_model="cpm", cost_value=3.0, owner_id=users["frugal"].id)
    cookie = log_in(panel, "frugal")
    page = get(panel, "/panel/campaigns/1", cookie)[2]
    assert 'name="cost_value"' not in page and 'name="cost_model"' not in page and "USD" not in page
    assert "payout" not in get(panel, "/panel/campaigns/1/streams/new", cookie)[2].lower()
    fields = {
        k: v for k, v in settings_form(token_of(page), name="Frugal").items() if not k.startswith("cost")
    }
    assert post(panel, "/panel/campaigns/1", fields, cookie=cookie)[0] == 303
    saved = get_campaign(db, 1)
    assert (saved.name, saved.cost_model, saved.cost_value) == ("Frugal", "cpm", 3.0)


def test_every_editor_write_needs_the_session_s_token(panel, users, db, campaign):
    from models.admin.services import list_streams

    cookie = log_in(panel)
    stream_id = list_streams(db, 1)[0].id
    for path in (
        "/panel/campaigns/new",
        "/panel/campaigns/1",
        "/panel/campaigns/1/streams/new",
        f"/panel/campaigns/1/streams/{stream_id}",
        f"/panel/campaigns/1/streams/{stream_id}/remove",
        "/panel/campaigns/1/streams/order",
    ):
        status, _, body = post(
            panel, path, {"csrf_token": "x" * 43, "name": "x", "order": str(stream_id)}, cookie=cookie
        )
        assert status == 403 and b"security token" in body, path
    assert len(list_streams(db, 1)) == 1


# -- escaping -------------------------------------------------------------------------------------


def test_names_and_filter_values_come_out_escaped(panel, users, db, campaign):
    from models.admin.services import add_stream, update_campaign, update_offer

    hostile = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
    update_campaign(db, 1, name=hostile)
    update_offer(db, 2, name=hostile)
    added = add_stream(
        db, 1, name=hostile, offers=[(2, 1)], filters=['referrer~"' + hostile.replace('"', '""') + '"']
    )
    cookie = log_in(panel)
    for path in (
        "/panel/campaigns/1",
        f"/panel/campaigns/1/streams/{added.id}",
        "/panel/campaigns/1/streams/new",
        "/panel/campaigns",
    ):
        page = get(panel, path, cookie)[2]
        assert "<img src=x" not in page and "<script>alert" not in page, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in page, path
    # A refused form echoes what was typed, escaped too.
    token = form_token(panel, cookie, "/panel/campaigns/1")
    status, _, body = post(panel, "/panel/campaigns/1", settings_form(token, alias=hostile), cookie=cookie)
    assert status == 400 and b"<img src=x" not in body


def test_an_editor_sees_the_click_api_token_and_the_script_tag_and_a_viewer_does_not(
    panel, users, db, campaign
):
    from models.accounts.sharing import share_campaign

    page = get(panel, "/panel/campaigns/1", log_in(panel))[2]
    assert 'id="campaign-token"' in page and f'value="{campaign.token}"' in page
    tag = (
        "&lt;script src=&#34;http://127.0.0.1/lanner.js&#34; data-campaign=&#34;spring&#34; async&gt;"
        "&lt;/script&gt;"
    )
    assert f'value="{tag}"' in page
    share_campaign(db, 1, "vera")
    viewer_page = get(panel, "/panel/campaigns/1", log_in(panel, "vera"))[2]
    assert campaign.token not in viewer_page and 'id="campaign-script"' not in viewer_page
