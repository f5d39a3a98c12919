"""Affiliate networks (models/conversions/networks.py): the service on a real database of each backend,
the CLI, the admin API in process, and a real `lanner serve` taking a postback built from a network's
template and mapping its status words."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import click, request
from test_api_v1 import accounts, admin, call, key  # noqa: F401


def status_of(db, params: dict) -> str:
    """The status a postback with these parameters is recorded as."""
    from models.conversions.postbacks import ConversionRecorder, parse_postback
    from models.store.conversions import ConversionStore

    postback = parse_postback({"subid": "01hq7c3d2v9xk4t8m", **params})
    return ConversionRecorder(db, park_ms=1000).status_of(ConversionStore(db.connection()), postback)


def test_a_network_from_the_catalogue_takes_its_macros_and_maps_only_its_unmapped_words(db):
    from models.accounts.audit import list_audit
    from models.conversions.admin import map_status
    from models.conversions.networks import create_network, network_status_maps, postback_url

    # A map made the old way, before the network: the network's own, and kept as it is.
    map_status(db, "5", "rejected", network="rocket")
    network = create_network(db, "Rocket", from_template="affise", tid_macro="{action_id}")
    assert (network.alias, network.subid_macro, network.payout_macro, network.tid_macro) == (
        "rocket",
        "{sub1}",
        "{sum}",
        "{action_id}",
    )
    words = {m["raw_status"]: m["status"] for m in network_status_maps(db, network)}
    assert words == {"1": "sale", "2": "lead", "3": "rejected", "5": "rejected"}
    assert postback_url(network, "https://t.example/", "KEY") == (
        "https://t.example/KEY/postback?subid={sub1}&payout={sum}&status={status}&tid={action_id}"
        "&currency={currency}&from=rocket"
    )
    # Its postbacks (from=rocket) are mapped by its words; another network's "1" is not its.
    assert status_of(db, {"status": "1", "from": "rocket"}) == "sale"
    assert status_of(db, {"status": "5", "from": "ROCKET"}) == "rejected"
    assert status_of(db, {"status": "1", "from": "other"}) == "1"  # Unmapped: counts nowhere.
    (entry,) = list_audit(db, entity="network")
    assert (entry.action, entry.new_values["template"], entry.new_values["alias"]) == (
        "create",
        "affise",
        "rocket",
    )
    assert {e.new_values["raw_status"] for e in list_audit(db, entity="status_map")} == {"1", "2", "3", "5"}


def test_aliases_are_checked_unique_and_fixed_and_a_network_needs_its_subid_macro(db):
    from models.admin.services import AdminConflict, AdminError, AdminNotFound
    from models.conversions.networks import create_network, get_network, update_network

    created = create_network(db, "Dr. Cash  EU", subid_macro="{sub1}")
    assert (
        created.alias == "dr.-cash-eu" and get_network(db, "DR.-CASH-EU").id == get_network(db, created.id).id
    )
    for call_, sentence in (
        (lambda: create_network(db, "Dr. Cash  EU", subid_macro="{x}"), "already exists"),
        (lambda: create_network(db, "N", alias="Bad alias!", subid_macro="{x}"), "must be 1-64 lowercase"),
        (lambda: create_network(db, "No subid"), "needs its macro for the subid"),
        (lambda: create_network(db, "Amp", subid_macro="{a}&x=1"), "no space, '&' or '='"),
        (lambda: create_network(db, "T", from_template="nope"), "no template 'nope'"),
        (lambda: update_network(db, created.id, alias="other"), "alias cannot change"),
        (lambda: update_network(db, created.id, status="gone"), "must be one of active, archived"),
        (lambda: update_network(db, 99, name="x"), "no network '99'"),
    ):
        with pytest.raises(AdminError, match=sentence) as raised:
            call_()
        assert isinstance(raised.value, AdminConflict) == (sentence == "already exists")
        assert isinstance(raised.value, AdminNotFound) == sentence.startswith(("no template", "no network"))
    archived = update_network(db, created.id, status="archived", payout_macro="{sum}", name="Dr.Cash")
    assert (archived.status, archived.payout_macro, archived.name, archived.alias) == (
        "archived",
        "{sum}",
        "Dr.Cash",
        "dr.-cash-eu",
    )
    # Archived, its postbacks still count: its maps stay.
    assert status_of(db, {"status": "approved", "from": "dr.-cash-eu"}) == "sale"


def test_an_offer_belongs_to_a_network_until_cleared_and_an_unknown_network_is_refused(db):
    from models.admin.services import AdminNotFound, create_offer, update_offer
    from models.conversions.networks import create_network, offer_counts

    network = create_network(db, "Net", subid_macro="{sub1}")
    offer = create_offer(db, "O", "https://o.example/?s={subid}", network_id=network.id)
    assert offer.network_id == network.id and offer_counts(db) == {network.id: 1}
    assert update_offer(db, offer.id, name="Renamed").network_id == network.id  # None leaves it.
    assert update_offer(db, offer.id, clear_network=True).network_id is None
    with pytest.raises(AdminNotFound, match="no network 42"):
        update_offer(db, offer.id, network_id=42)
    with pytest.raises(AdminNotFound, match="no network 42"):
        create_offer(db, "P", "https://p.example/", network_id=42)


def test_an_offer_of_a_network_gets_the_parameters_its_url_lacks_and_keeps_those_it_has(db):
    from models.admin.services import create_offer, update_offer
    from models.conversions.networks import create_network

    network = create_network(db, "Net", subid_macro="{sub1}", offer_params="sub1={subid}&sub2={sub_id_1}")
    bare = create_offer(db, "Bare", "https://o.example/go?aff=7#top", network_id=network.id)
    assert bare.url == "https://o.example/go?aff=7&sub1={subid}&sub2={sub_id_1}#top"
    own = create_offer(db, "Own", "https://o.example/?sub1={subid}", network_id=network.id)
    assert own.url == "https://o.example/?sub1={subid}&sub2={sub_id_1}"  # Its own sub1 is kept as it is.
    plain = create_offer(db, "Plain", "https://p.example/")
    assert plain.url == "https://p.example/"  # No network, nothing added.
    assert (
        update_offer(db, plain.id, network_id=network.id).url
        == "https://p.example/?sub1={subid}&sub2={sub_id_1}"
    )
    # A new URL for an offer of the network gets them too; clearing the network leaves the URL alone.
    assert (
        update_offer(db, plain.id, url="https://q.example/").url
        == "https://q.example/?sub1={subid}&sub2={sub_id_1}"
    )
    assert (
        update_offer(db, plain.id, clear_network=True, url="https://r.example/").url == "https://r.example/"
    )


def test_the_api_lists_creates_reads_and_changes_networks_and_only_an_admin_writes(
    admin,  # noqa: F811
    accounts,  # noqa: F811
    key,  # noqa: F811
):
    status, created = call(admin, "POST", "/networks", key, {"name": "Rocket", "template": "affise"})
    assert status == 201 and created["alias"] == "rocket", created
    assert created["postback_query"].endswith("&currency={currency}&from=rocket")
    assert {"word": "1", "status": "sale"} in created["status_maps"]
    status, again = call(admin, "POST", "/networks", key, {"name": "Rocket", "subid_macro": "{s}"})
    assert status == 409 and "already exists" in again["description"]
    status, changed = call(admin, "PATCH", "/networks/rocket", key, {"status_macro": "", "name": "R"})
    assert status == 200 and "status=" not in changed["postback_query"] and changed["name"] == "R"
    assert call(admin, "PATCH", "/networks/1", key, {"alias": "x"})[0] == 400  # No such field.
    assert call(admin, "GET", "/networks/nope", key)[0] == 404
    fields = {"name": "O", "url": "https://o.example/", "network_id": 1}
    status, offer = call(admin, "POST", "/offers", key, fields)
    assert status == 201 and offer["network_id"] == 1
    status, offer = call(admin, "PATCH", f"/offers/{offer['id']}", key, {"clear_network": True})
    assert status == 200 and offer["network_id"] is None
    status, templates = call(admin, "GET", "/network-templates", key)
    assert {t["key"] for t in templates["items"]} >= {"affise"} and "starting point" in templates["about"]
    # A buyer reads networks (its offers name them) and may not change one.
    app, keys = accounts
    status, listed = call(app, "GET", "/networks", keys["anna"])
    assert status == 200 and [n["alias"] for n in listed["items"]] == ["rocket"]
    for method, path, body in (
        ("POST", "/networks", {"name": "Mine", "subid_macro": "{s}"}),
        ("PATCH", "/networks/rocket", {"name": "Mine"}),
    ):
        status, refused = call(app, method, path, keys["anna"], body)
        assert status == 403 and "Only an admin" in refused["description"]


def test_a_real_server_takes_a_postback_built_from_the_network_s_template(db, lanner, server):
    from models.admin.services import create_campaign, create_offer
    from models.conversions.admin import map_status
    from models.conversions.networks import create_network, postback_url
    from models.conversions.postbacks import read_secret

    map_status(db, "5", "trash", network="rocket")  # Made before the network, the old way.
    network = create_network(db, "Rocket", from_template="affise")
    offer = create_offer(db, "Shop", "https://shop.example/?sub1={subid}", payout=3, network_id=network.id)
    create_campaign(db, "Summer", "summer", offer_id=offer.id)
    status, headers, _ = click(server.port, "summer")
    assert status == 302
    subid = parse_qs(urlsplit(headers["location"]).query)["sub1"][0]
    lanner("spool", "flush")
    # The network fills its macros in the URL the buyer pasted: pending (2), approved (1), then 5.
    url = urlsplit(postback_url(network, f"http://127.0.0.1:{server.port}", read_secret(db, "postback_key")))
    verdicts = []
    for word in ("2", "1", "5"):
        values = {
            "{sub1}": subid,
            "{sum}": "12.5",
            "{status}": word,
            "{transactionid}": "T-9",
            "{currency}": "USD",
        }
        query = url.query
        for macro, value in values.items():
            query = query.replace(macro, value)
        status, _, body = request(server.port, f"{url.path}?{query}")
        assert status == 200, body
        verdicts.append(json.loads(body)["verdict"])
    # A sale may become rejected, never trash: the network's 5 (trash here) is refused.
    assert verdicts == ["created", "updated", "refused"]
    (conversion,) = json.loads(lanner("conversion", "list", "--json").stdout)
    assert (conversion["status"], conversion["original_status"], conversion["payout"], conversion["tid"]) == (
        "sale",
        "lead",
        12.5,
        "T-9",
    )


def test_every_catalogue_template_makes_a_network_whose_url_carries_its_macros_and_maps_its_words(db):
    from models.conversions.networks import catalogue, create_network, network_status_maps, postback_url

    templates = catalogue()
    named = [t for t in templates.values() if not t.name.endswith("-based network")]
    assert len(named) >= 15  # Networks by name, besides the platforms many run on.
    for template in templates.values():
        assert template.source.startswith("https://"), template.key
        network = create_network(db, template.name, from_template=template.key)
        query = urlsplit(postback_url(network, "https://t.example", "k")).query
        sent = {name: values[0] for name, values in parse_qs(query).items()}
        assert sent["subid"] == template.subid_macro and sent["from"] == network.alias
        for field, parameter in (
            ("payout_macro", "payout"),
            ("status_macro", "status"),
            ("tid_macro", "tid"),
        ):
            assert sent.get(parameter, "") == getattr(template, field), (template.key, parameter)
        maps = {m["raw_status"]: m["status"] for m in network_status_maps(db, network)}
        assert maps == template.statuses, template.key


# The CLI's options and output; the services it calls run on both backends above (a PostgreSQL process
# start costs each of these commands a second more).
@pytest.mark.sqlite_only
def test_the_cli_creates_lists_shows_updates_and_prints_the_catalogue(lanner):
    created = lanner(
        "network",
        "create",
        "Adv Net",
        "--subid-macro",
        "{clickid}",
        "--payout-macro",
        "{sum}",
        "--status-macro",
        "{status}",
        "--tid-macro",
        "{transaction_id}",
    )
    assert "Network 1 (adv-net) created." in created.stderr
    assert re.fullmatch(
        r"postback URL: https://YOUR-DOMAIN/[0-9a-f]{32}/postback\?subid=\{clickid\}&payout=\{sum\}"
        r"&status=\{status\}&tid=\{transaction_id\}&from=adv-net",
        created.stdout.strip(),
    ), created.stdout
    lanner("network", "update", "adv-net", "--offer-params", "sub1={subid}", "--status", "archived")
    lanner("offer", "create", "O", "--url", "https://o.example/", "--network", "1")
    csv_lines = lanner("network", "list", "--all", "--csv").stdout.splitlines()
    assert csv_lines[0].startswith("id,alias,name,status,offers")
    assert csv_lines[1].startswith("1,adv-net,Adv Net,archived,1,")
    lanner("offer", "update", "1", "--network", "")
    shown = json.loads(lanner("network", "show", "adv-net", "--json").stdout)
    assert (shown["offer_params"], shown["status"]) == ("sub1={subid}", "archived")
    assert shown["postback_url"] == created.stdout.strip().removeprefix("postback URL: ")
    refused = lanner("offer", "update", "1", "--network", "nope", check=False)
    assert refused.returncode == 1 and "There is no network 'nope'." in refused.stderr
    assert json.loads(lanner("offer", "list", "--json").stdout)[0]["network_id"] is None
    catalogue = json.loads(lanner("network", "catalogue", "--json").stdout)
    assert all(entry["source"].startswith("https://") and entry["subid_macro"] for entry in catalogue)


def test_reports_group_and_filter_by_network_as_the_sums_of_its_offers(db):
    from models.admin.services import create_offer, update_offer
    from models.conversions.networks import create_network
    from models.conversions.postbacks import ConversionRecorder, Received, parse_postback
    from models.migrations.deferred import run_deferred
    from models.reporting.reports import ReportQuery, run_report
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 400, 3, campaigns=3, seed=3)  # Offers 1, 2, 3, one per campaign.
    run_deferred(db)
    rocket = create_network(db, "Rocket", subid_macro="{sub1}")
    other = create_network(db, "Other", subid_macro="{s}")
    create_offer(db, "Unused", "https://u.example/", network_id=other.id)
    update_offer(db, 1, network_id=rocket.id)
    update_offer(db, 2, network_id=rocket.id)  # Offer 3: no network.
    recorder = ConversionRecorder(db, park_ms=1000)
    subids = [row[0] for row in db.execute_sql("SELECT subid FROM click ORDER BY id LIMIT 60").fetchall()]
    for n, subid in enumerate(subids):
        recorder.record(parse_postback({"subid": subid, "payout": str(n % 7 + 1)}), Received("GET", "", ""))

    def report(group_by, **filters):
        query = dict(group_by=group_by, preset="all_time", filters=filters)
        fast, raw = run_report(db, ReportQuery(**query)), run_report(db, ReportQuery(**query, source="raw"))
        assert fast.rows == raw.rows and fast.sources != ["raw"], group_by
        return fast.rows

    by_offer = {row["offer"]: row for row in report(("offer",))}
    rows = {row["network"]: row for row in report(("network",))}
    assert set(rows) == {rocket.id, None}  # Other's offer has no clicks.
    assert rows[rocket.id]["network_name"] == "Rocket"
    for metric in ("clicks", "conversions", "revenue"):
        assert rows[rocket.id][metric] == pytest.approx(by_offer[1][metric] + by_offer[2][metric])
        assert rows[None][metric] == pytest.approx(by_offer[3][metric])
    assert rows[rocket.id]["clicks"] and rows[rocket.id]["conversions"] and rows[None]["clicks"]
    nested = report(("network", "offer"))
    assert [(row["network"], row["offer"]) for row in nested] == [(rocket.id, 1), (rocket.id, 2), (None, 3)]
    by_day = report(("day", "network"))
    assert sum(row["clicks"] for row in by_day if row["network"] == rocket.id) == rows[rocket.id]["clicks"]
    # A network filter is a filter on its offers; 0 is none, and with an offer filter they intersect.
    (only,) = report(("network",), network=(str(rocket.id),))
    assert only["clicks"] == rows[rocket.id]["clicks"]
    (none,) = report(("campaign",), network=("0",))
    assert none["clicks"] == rows[None]["clicks"]
    (both,) = report(("offer",), network=(str(rocket.id),), offer=("2", "3"))
    assert both["offer"] == 2
    assert report(("offer",), network=(str(other.id),)) == []
