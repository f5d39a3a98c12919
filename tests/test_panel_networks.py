"""The panel's network pages (/panel/networks) in process: create from the catalogue or from macros, a
network's page with the postback URL (its key an admin's only), settings, status words and offers, roles,
CSRF and escaping."""

from __future__ import annotations

import html as markup
import re

import pytest
from test_panel import csrf_token, get, log_in, make_panel, panel, post, users  # noqa: F401

NEW = {
    "name": "Rocket",
    "alias": "",
    "template": "affise",
    "subid_macro": "",
    "payout_macro": "",
    "status_macro": "",
    "tid_macro": "",
    "currency_macro": "",
    "offer_params": "",
    "notes": "",
}


def copy_value(html: str, element_id: str) -> str:
    return markup.unescape(re.search(rf'value="([^"]*)"[^>]*id="{element_id}"', html).group(1))


def test_an_admin_creates_a_network_from_the_catalogue_and_its_page_shows_the_url_to_paste(
    panel,  # noqa: F811
    users,  # noqa: F811
    db,  # noqa: F811
):
    from models.accounts.audit import list_audit
    from models.conversions.postbacks import read_secret

    cookie = log_in(panel)
    listing = get(panel, "/panel/networks", cookie)[2]
    assert "Affise-based network" in listing and "help-center.affise.com" in listing
    assert "starting point" in listing
    form = {**NEW, "csrf_token": csrf_token(listing)}
    status, headers, _ = post(panel, "/panel/networks", form, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/networks/1?done=created"
    page = get(panel, headers["location"], cookie)[2]
    key = read_secret(db, "postback_key")
    assert copy_value(page, "network-postback-url") == (
        f"http://127.0.0.1/{key}/postback?subid={{sub1}}&payout={{sum}}&status={{status}}"
        "&tid={transactionid}&currency={currency}&from=rocket"
    )
    assert "Network created" in page and 'id="offer-params">sub1={subid}</code>' in page
    words = re.findall(r"<tr><td><code>(\w+)</code></td><td>(\w+)</td>", page)
    assert words == [("1", "sale"), ("2", "lead"), ("3", "rejected"), ("5", "lead")]
    assert [entry.actor for entry in list_audit(db, entity="network")] == ["anna"]
    assert "rocket" in get(panel, "/panel/networks", cookie)[2]


def test_a_refused_network_keeps_what_was_typed_and_says_why(panel, users, db):  # noqa: F811
    from models.conversions.networks import list_networks

    cookie = log_in(panel)
    token = csrf_token(get(panel, "/panel/networks", cookie)[2])
    for fields, sentence in (
        ({"alias": "Not OK!"}, "must be 1-64 lowercase letters"),
        ({"template": "", "payout_macro": "{sum}"}, "needs its macro for the subid"),
        ({"template": "", "subid_macro": "{a} b"}, "no space"),
        ({"name": ""}, "needs a name"),
    ):
        form = {**NEW, **fields, "csrf_token": token}
        status, _, body = post(panel, "/panel/networks", form, cookie=cookie)
        page = body.decode()
        assert status == 400 and 'role="alert"' in page and sentence in page, (fields, page[-1500:])
        assert '<details class="card new-network" open>' in page
        assert ('value="Rocket"' in page) == ("name" not in fields)  # The form as it was sent.
    assert list_networks(db) == []


def test_an_admin_edits_a_network_and_maps_and_unmaps_its_words(panel, users, db):  # noqa: F811
    from models.conversions.admin import list_status_maps
    from models.conversions.networks import create_network, get_network

    create_network(db, "Adv", subid_macro="{clickid}")
    cookie = log_in(panel)
    page = get(panel, "/panel/networks/1", cookie)[2]
    token = csrf_token(page)
    fields = {
        "name": "Adv Net",
        "status": "active",
        "subid_macro": "{clickid}",
        "payout_macro": "{sum}",
        "status_macro": "{status}",
        "tid_macro": "",
        "currency_macro": "",
        "offer_params": "aff={subid}",
        "notes": "manager: bob",
        "do": "save",
        "csrf_token": token,
    }
    status, headers, _ = post(panel, "/panel/networks/1", fields, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/networks/1?done=saved"
    network = get_network(db, "adv")
    assert (network.name, network.payout_macro, network.offer_params, network.notes) == (
        "Adv Net",
        "{sum}",
        "aff={subid}",
        "manager: bob",
    )
    assert copy_value(get(panel, "/panel/networks/1", cookie)[2], "network-postback-url").endswith(
        "/postback?subid={clickid}&payout={sum}&status={status}&from=adv"
    )
    status, _, body = post(panel, "/panel/networks/1", {**fields, "payout_macro": "a=b"}, cookie=cookie)
    assert status == 400 and b"no space, &#39;&amp;&#39; or &#39;=&#39;" in body and b'value="a=b"' in body
    mapped = {"word": "Hold", "status": "lead", "do": "map", "csrf_token": token}
    assert post(panel, "/panel/networks/1", mapped, cookie=cookie)[1]["location"].endswith("done=mapped")
    assert list_status_maps(db) == [{"network": "adv", "raw_status": "hold", "status": "lead"}]
    unmapped = {"word": "hold", "do": "unmap", "csrf_token": token}
    assert post(panel, "/panel/networks/1", unmapped, cookie=cookie)[1]["location"].endswith("done=unmapped")
    assert list_status_maps(db) == []
    assert post(panel, "/panel/networks/1", {"do": "drop", "csrf_token": token}, cookie=cookie)[0] == 400
    assert get(panel, "/panel/networks/9", cookie)[0] == 404
    # How its statuses change: left as they were by a form without them, set by one with them.
    assert (get_network(db, "adv").status_changes, get_network(db, "adv").rebills) == ("forward", "own_tid")
    rules = {**fields, "status_changes": "any", "rebills": "repeat_sale"}
    assert post(panel, "/panel/networks/1", rules, cookie=cookie)[0] == 303
    assert (get_network(db, "adv").status_changes, get_network(db, "adv").rebills) == ("any", "repeat_sale")
    page = get(panel, "/panel/networks/1", cookie)[2]
    assert '<option value="any" selected>' in page and '<option value="repeat_sale" selected>' in page
    status, _, body = post(panel, "/panel/networks/1", {**rules, "rebills": "often"}, cookie=cookie)
    assert status == 400 and b"rebills is one of own_tid, repeat_sale, not &#39;often&#39;." in body


def test_others_see_networks_without_the_key_and_may_not_change_them(panel, users, db):  # noqa: F811
    from models.conversions.networks import create_network, get_network

    create_network(db, "Adv", subid_macro="{clickid}")
    buyer = log_in(panel, "bert")
    page = get(panel, "/panel/networks/1", buyer)[2]
    assert copy_value(page, "network-postback-url").startswith("http://127.0.0.1/POSTBACK-KEY/postback?")
    assert "<fieldset disabled>" in page and "save-network" not in page and "map-network-status" not in page
    assert "New network" not in get(panel, "/panel/networks", buyer)[2]
    token = csrf_token(page)
    assert post(panel, "/panel/networks", {**NEW, "csrf_token": token}, cookie=buyer)[0] == 403
    save = {"name": "Mine", "subid_macro": "{x}", "do": "save", "csrf_token": token}
    assert post(panel, "/panel/networks/1", save, cookie=buyer)[0] == 403
    admin = log_in(panel)
    assert post(panel, "/panel/networks/1", {**save, "csrf_token": "x" * 43}, cookie=admin)[0] == 403
    assert get_network(db, 1).name == "Adv"


def test_an_offer_names_its_network_on_its_form_and_the_network_page_lists_it(panel, users, db):  # noqa: F811
    from models.admin.services import create_offer, get_offer
    from models.conversions.networks import create_network, update_network

    create_network(db, "Adv", subid_macro="{clickid}")
    create_network(db, "Old", subid_macro="{s}")
    update_network(db, "old", status="archived")
    create_offer(db, "Shop", "https://shop.example/?clickid={subid}")
    cookie = log_in(panel, "bert")  # A buyer changes offers, and names any network.
    page = get(panel, "/panel/offers/1", cookie)[2]
    assert '<option value="1">Adv</option>' in page and ">Old</option>" not in page  # Archived: not offered.
    fields = {
        "name": "Shop",
        "url": "https://shop.example/?clickid={subid}",
        "payout": "1",
        "currency": "USD",
        "daily_cap": "",
        "total_cap": "",
        "timezone": "UTC",
        "status": "active",
        "network": "1",
        "csrf_token": csrf_token(page),
    }
    assert post(panel, "/panel/offers/1", fields, cookie=cookie)[0] == 303
    assert get_offer(1).network_id == 1
    assert '<option value="1" selected>Adv</option>' in get(panel, "/panel/offers/1", cookie)[2]
    assert 'href="/panel/offers/1">Shop</a>' in get(panel, "/panel/networks/1", cookie)[2]
    status, _, body = post(panel, "/panel/offers/1", {**fields, "network": "7"}, cookie=cookie)
    assert status == 400 and b"There is no network 7." in body and get_offer(1).network_id == 1
    assert post(panel, "/panel/offers/1", {**fields, "network": ""}, cookie=cookie)[0] == 303
    assert get_offer(1).network_id is None


def test_network_names_and_macros_come_out_escaped(panel, users, db):  # noqa: F811
    from models.conversions.networks import create_network

    create_network(db, '<script>alert("x")</script>', alias="x", subid_macro='"><img/src>', notes="<b>n</b>")
    cookie = log_in(panel)
    for path in ("/panel/networks", "/panel/networks/1"):
        page = get(panel, path, cookie)[2]
        assert "<script>alert" not in page and "<img/src>" not in page and "<b>n</b>" not in page
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_the_report_builder_groups_by_network_and_drills_into_one(panel, users, db):  # noqa: F811
    from models.admin.services import update_offer
    from models.conversions.networks import create_network
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 120, 1, campaigns=2, seed=5)
    create_network(db, "Rocket", subid_macro="{sub1}")
    update_offer(db, 1, network_id=1)
    cookie = log_in(panel)
    page = get(panel, "/panel/reports?period=last_7_days&g1=network&g2=offer", cookie)[2]
    assert ">Network</option>" in page and "Rocket" in page and "(none)" in page
    assert "d1=1" in page  # Rocket's row drills into its offers.
    drilled = get(panel, "/panel/reports?period=last_7_days&g1=network&g2=offer&d1=1", cookie)[2]
    assert "Network: Rocket" in drilled and "Generated offer 0" in drilled
    assert "Generated offer 1" not in drilled


def test_a_network_no_offer_belongs_to_is_deleted_and_its_status_words_stay(panel, users, db):  # noqa: F811
    from models.accounts.audit import list_audit
    from models.admin.services import AdminConflict, AdminError, create_offer, update_offer
    from models.conversions.admin import list_status_maps
    from models.conversions.networks import create_network, delete_network, get_network

    create_network(db, "Rocket", from_template="affise")
    create_offer(db, "Shop", "https://shop.example/", network_id=1)
    with pytest.raises(AdminConflict, match=r"'Rocket' is the network of offer 1: give them another network"):
        delete_network(db, "rocket")
    cookie = log_in(panel)
    page = get(panel, "/panel/networks/1", cookie)[2]
    assert 'id="delete-network"' not in page  # An offer belongs to it.
    form = {"do": "delete", "csrf_token": csrf_token(page)}
    status, _, body = post(panel, "/panel/networks/1", form, cookie=cookie)
    assert status == 400 and b"is the network of offer 1" in body
    update_offer(db, 1, clear_network=True)
    page = get(panel, "/panel/networks/1", cookie)[2]
    assert 'id="delete-network"' in page
    buyer = log_in(panel, "bert")
    token = csrf_token(get(panel, "/panel/networks/1", buyer)[2])
    assert post(panel, "/panel/networks/1", {"do": "delete", "csrf_token": token}, cookie=buyer)[0] == 403
    form = {"do": "delete", "csrf_token": csrf_token(page)}
    status, headers, _ = post(panel, "/panel/networks/1", form, cookie=cookie)
    assert status == 303 and headers["location"] == "/panel/networks?deleted=rocket"
    assert "Network rocket deleted" in get(panel, headers["location"], cookie)[2]
    with pytest.raises(AdminError, match="no network 'rocket'"):
        get_network(db, "rocket")
    assert {m["network"] for m in list_status_maps(db)} == {"rocket"}  # The alias's words are kept.
    assert [entry.action for entry in list_audit(db, entity="network")][0] == "delete"


def test_a_template_s_settings_are_previewed_with_the_typed_changes_before_anything_is_saved(
    panel,  # noqa: F811
    users,  # noqa: F811
    db,  # noqa: F811
):
    from models.conversions.admin import list_status_maps, map_status
    from models.conversions.networks import list_networks
    from models.conversions.postbacks import read_secret

    map_status(db, "3", "trash", network="rocket")  # Its alias has a word mapped already: kept.
    cookie = log_in(panel)
    form = {**NEW, "payout_macro": "{payout}", "do": "preview"}
    form["csrf_token"] = csrf_token(get(panel, "/panel/networks", cookie)[2])
    status, _, body = post(panel, "/panel/networks", form, cookie=cookie)
    page = body.decode()
    assert status == 200, page
    key = read_secret(db, "postback_key")
    assert copy_value(page, "preview-postback-url") == (
        f"http://127.0.0.1/{key}/postback?subid={{sub1}}&payout={{payout}}&status={{status}}"
        "&tid={transactionid}&currency={currency}&from=rocket"
    )
    assert "from the template Affise-based network" in page and "<td>forward</td><td>own_tid</td>" in page
    maps = re.search(r'<p id="preview-maps">(.*?)</p>', page, re.S).group(1)
    assert "<code>1</code>→sale, <code>2</code>→lead, <code>5</code>→lead." in maps
    assert "kept as they are: <code>3</code>→trash." in maps
    assert 'value="{payout}"' in page and '<details class="card new-network" open>' in page  # As typed.
    assert list_networks(db) == [] and len(list_status_maps(db)) == 1  # Nothing saved.
    form["alias"] = "Bad Alias"
    status, _, body = post(panel, "/panel/networks", form, cookie=cookie)
    assert status == 400 and "must be 1-64 lowercase letters" in body.decode()
    assert 'id="network-preview"' not in body.decode()
