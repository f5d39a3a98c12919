"""A buyer crawls the whole panel and the admin API over HTTP against a real `lanner serve`, and nothing of
a campaign not shared with them shows anywhere: names, aliases, stream and offer names, landers only it
uses, its clicks' subids, its conversions, its postback target, its token, or its ids in links.

The pages are enumerated from the admin app's routes table, not from a list kept here: a new page is
crawled as soon as it is routed (a new path parameter fails the test until VALUES says what to fill it
with). Every page's links are followed too (periods, filters, pages of a log, CSV exports), and each
route naming an object is asked for the unshared campaign's object as well: that must be a 403 or 404
that names nothing of it."""

from __future__ import annotations

import html as htmllib
import json
import re
import urllib.parse
from collections import deque

from conftest import click, request
from test_panel import PASSWORD, cookie_of, post

SECRET = "zebracorn"  # Every name of the unshared campaign's own objects carries it.
MAX_VARIANTS = 12  # Query-string variants of one path followed from links (the reports drill deep).
MAX_REQUESTS = 900
BROWSER = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)


def routes(settings, db) -> list[str]:
    """The URI templates of the admin app that answer GET (static files aside: no data in them)."""
    from app import create_admin_app

    app = create_admin_app(settings, db=db)

    def walk(nodes):
        for node in nodes:
            get = node.method_map.get("GET") if node.resource is not None else None
            if get is not None and get.__name__ != "method_not_allowed":
                yield node.uri_template
            yield from walk(node.children)

    return sorted(walk(app._router._roots))


FIELD = re.compile(r"\{([a-z_]+)(?::[^}]*)?\}")


def fill(template: str, values: dict[str, list[str]]) -> list[str]:
    """Each URL `template` stands for with the values VALUES gives its parameters (by the segment before
    each: `campaigns/{ref}` is a campaign's); an AssertionError names a parameter nothing fills."""
    urls = [""]
    for segment_before, part in _parts(template):
        match = FIELD.fullmatch(part)
        if match is None:
            urls = [url + "/" + part for url in urls]
            continue
        key = f"{segment_before}/{match.group(1)}"
        assert key in values, f"{template}: no value for {key}; add it to the crawl's values"
        urls = [url + "/" + urllib.parse.quote(str(value)) for url in urls for value in values[key]]
    return urls


def _parts(template: str):
    parts = template.strip("/").split("/")
    return [(parts[i - 1] if i else "", part) for i, part in enumerate(parts)]


def links(body: str) -> list[str]:
    found = re.findall(r'(?:href|hx-get|action)="(/(?:panel|api)[^"#]*)"', body)
    return [htmllib.unescape(link) for link in found]


class Leaks:
    def __init__(self, forbidden: list[str], patterns: list[re.Pattern]) -> None:
        self.forbidden = [text.lower() for text in forbidden]
        self.patterns = patterns
        self.found: list[str] = []

    def check(self, url: str, status: int, body: str, asked: str = "") -> None:
        """Record what of the unshared campaign `body` shows; `asked`: what the request named (its name,
        subid or id), which a refusal may say back ("There is no lander 'X'"): that tells nothing new."""
        assert status < 500, f"{url}: {status}\n{body[:2000]}"
        if asked:
            body = re.sub(re.escape(asked), "<asked>", body, flags=re.IGNORECASE)
        lowered = body.lower()
        for text in self.forbidden:
            if text in lowered:
                at = lowered.index(text)
                self.found.append(f"{url} ({status}) shows {text!r}: …{body[max(0, at - 150) : at + 80]}…")
        for pattern in self.patterns:
            for match in pattern.finditer(body):
                at = match.start()
                self.found.append(
                    f"{url} ({status}) links {match.group(0)!r}: …{body[max(0, at - 150) : at + 80]}…"
                )


class Amounts:
    """What of money a page or CSV shows a user who hides it: an amount in the report currency, or a
    CSV column of amounts."""

    AMOUNT = re.compile(r"[0-9]\.[0-9]{2} USD")
    HEADERS = {"Revenue", "Cost", "Profit", "ROI", "EPC", "CPC", "Payout", "Payout currency"}

    def __init__(self) -> None:
        self.found: list[str] = []

    def check(self, url: str, body: str) -> None:
        if url.split("?")[0].endswith(".csv"):
            shown = self.HEADERS & set(body.partition("\n")[0].strip().split(","))
            if shown:
                self.found.append(f"{url} has the columns {sorted(shown)}")
            return
        match = self.AMOUNT.search(body)
        if match:
            at = match.start()
            self.found.append(f"{url} shows {match.group(0)!r}: …{body[max(0, at - 150) : at + 40]}…")


def seed(db, port: int, lanner) -> dict:
    """Two campaigns of buyer `olga` sharing a lander, a traffic source and a network, with clicks
    (through the landers, some on to the offers), conversions, costs and postback targets; buyer `bert`
    is shared the first (with edit), viewer `vera` the first (to see), neither the second."""
    from models.accounts.sharing import share_campaign
    from models.accounts.users import add_user
    from models.admin.domains import create_domain
    from models.admin.landers import create_lander
    from models.admin.services import add_stream, create_campaign, create_offer
    from models.admin.sources import create_source
    from models.conversions.admin import add_target
    from models.conversions.networks import create_network
    from models.conversions.postbacks import read_secret
    from models.reporting.columnpages import CAMPAIGNS
    from models.reporting.columnsets import save_set
    from models.reporting.costs import set_campaign_cost
    from models.tables.campaign import Campaign, Stream

    bert = add_user(db, "bert", "buyer", PASSWORD)
    add_user(db, "vera", "viewer", PASSWORD)
    add_user(db, "hugo", "viewer", PASSWORD, hides_money=True)
    olga = add_user(db, "olga", "buyer", PASSWORD)
    network = create_network(db, "Common Net", alias="commonnet", subid_macro="{sub1}")
    create_source(db, "Common Push", "zone={zoneid}")
    lander = create_lander(db, "Common LP", url="https://lp.example/common?s={subid}&go={offer}")
    secret_lander = create_lander(
        db, "Zebracorn LP", url="https://zebracorn-lp.example/?s={subid}&go={offer}"
    )
    shared_offer = create_offer(
        db, "Open Offer", "https://open.example/?s={subid}", payout=3, network_id=network.id
    )
    secret_offer = create_offer(
        db, "Zebracorn Offer", "https://zebracorn-offer.example/?s={subid}", payout=7, network_id=network.id
    )
    shared = create_campaign(
        db,
        "Open Campaign",
        "opencamp",
        offer_id=shared_offer.id,
        landers=[(lander.id, 100)],
        owner_id=olga.id,
        source="Common Push",
    )
    secret = create_campaign(
        db,
        "Zebracorn Campaign",
        "zebracorn",
        offer_id=secret_offer.id,
        landers=[(lander.id, 100)],
        owner_id=olga.id,
        source="Common Push",
    )
    save_set(db, olga.id, CAMPAIGNS, "Zebracorn columns", ["clicks"], hides_money=False)
    share_campaign(db, shared.id, "bert", may_edit=True)
    share_campaign(db, shared.id, "vera")
    share_campaign(db, shared.id, "hugo")
    add_stream(
        db,
        secret.id,
        name="Zebracorn Stream",
        type="intercepting",
        offers=[(secret_offer.id, 100)],
        landers=[(secret_lander.id, 100)],
        filters=["keyword=zebra"],
    )
    add_target(db, "zebracorn", "https://zebracorn-target.example/pb?s={subid}", ["sale", "lead"])
    add_target(db, "opencamp", "https://open-target.example/pb?s={subid}", ["sale", "lead"])
    create_domain(db, "zebracorn.example", campaign="zebracorn")
    key = read_secret(db, "postback_key")

    subids: dict[str, list[str]] = {"opencamp": [], "zebracorn": []}
    for alias, query in (("opencamp", "zoneid=7"), ("zebracorn", "zoneid=8"), ("zebracorn", "keyword=zebra")):
        for n in range(3):
            status, headers, _ = click(
                port, alias, query, ip=f"198.51.100.{len(subids[alias]) + 1}", ua=BROWSER
            )
            assert status == 302, (alias, status)
            location = headers["location"]
            subids[alias].append(urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["s"][0])
            go = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["go"][0]
            if n < 2:  # A lander view clicked through; the third is not.
                assert (
                    request(port, urllib.parse.urlsplit(go).path + "?" + urllib.parse.urlsplit(go).query)[0]
                    == 302
                )
    every = subids["opencamp"] + subids["zebracorn"]
    from models.store.rows import fetch_one

    def stored() -> bool:
        marks = ",".join("?" * len(every))
        return fetch_one(db.connection(), f"SELECT COUNT(*) FROM click WHERE subid IN ({marks})", every)[
            0
        ] == len(every)

    lanner("spool", "flush")
    assert stored()
    tids = {}
    for alias, ids in subids.items():
        for n, subid in enumerate(ids[:3]):
            tid = f"{alias}-tid-{n}"
            tids[tid] = alias
            status, _, body = request(
                port, f"/postback?key={key}&subid={subid}&status={'sale' if n else 'lead'}&payout=5&tid={tid}"
            )
            assert status == 200, body
    today = __import__("datetime").date.today().isoformat()
    set_campaign_cost(db, shared.id, today, today, 4.0, cost_currency="USD")
    set_campaign_cost(db, secret.id, today, today, 9.0, cost_currency="USD")
    secret_streams = [s.id for s in Stream.select().where(Stream.campaign == secret.id)]
    shared_streams = [s.id for s in Stream.select().where(Stream.campaign == shared.id)]
    return {
        "bert": bert,
        "shared": Campaign.get_by_id(shared.id),
        "secret": Campaign.get_by_id(secret.id),
        "shared_streams": shared_streams,
        "secret_streams": secret_streams,
        "shared_offer": shared_offer,
        "secret_offer": secret_offer,
        "lander": lander,
        "secret_lander": secret_lander,
        "network": network,
        "subids": subids,
        "tids": tids,
    }


def conversion_ids(db, campaign_id: int) -> list[int]:
    from models.tables.conversion import Conversion

    return [row.id for row in Conversion.select(Conversion.id).where(Conversion.campaign_id == campaign_id)]


def test_a_buyer_or_viewer_crawling_every_page_and_api_list_sees_nothing_of_a_campaign_not_shared(
    start_server, settings, db, lanner
):
    from models.accounts.apikeys import create_api_key
    from models.tables.source import TrafficSource

    live = start_server(admin=True)
    seeded = seed(db, live.port, lanner)
    admin_port = live.extra["admin_port"]
    shared, secret = seeded["shared"], seeded["secret"]
    source = TrafficSource.get(TrafficSource.name == "Common Push")

    # What the buyer may ask for, by the segment before the parameter; the unshared campaign's own are probes.
    values = {
        "campaigns/campaign_id": [shared.id],
        "campaigns/ref": [shared.id, shared.alias],
        "streams/stream_id": seeded["shared_streams"],
        "offers/offer_id": [seeded["shared_offer"].id],
        "landers/lander_id": [seeded["lander"].id],
        "landers/ref": [seeded["lander"].id],
        "sources/source_id": [source.id],
        "sources/ref": [source.id],
        "networks/network_id": [seeded["network"].id],
        "networks/ref": [seeded["network"].id],
        "domains/domain_id": [1],
        "domains/ref": [1],
        "clicks/subid": seeded["subids"]["opencamp"][:2],
        "conversions/conversion_id": conversion_ids(db, shared.id)[:2],
        "users/user_id": [seeded["bert"].id],
        "rules/ref": ["cut zones"],  # An admin's: refused.
        "rule-actions/action_id": [1],
        "platforms/connection_id": [1],  # An admin's page: refused to a buyer before any lookup.
        "platform-connections/ref": [1],
        "spend/spend_id": [1],  # An admin's page: refused to a buyer before any lookup.
        "spend-connections/ref": [1],
        "rules/rule_id": [1],  # An admin's page: refused to a buyer before any lookup.
        "alert-channels/ref": [1],
        "column-sets/set_id": [1],  # Olga's (seed): a 404, its name never shown.
    }
    probes = {
        "campaigns/campaign_id": [secret.id],
        "campaigns/ref": [secret.id, secret.alias],
        "streams/stream_id": seeded["secret_streams"],
        "offers/offer_id": [seeded["secret_offer"].id],
        "landers/lander_id": [seeded["secret_lander"].id],
        "landers/ref": [seeded["secret_lander"].id, "Zebracorn LP"],
        "clicks/subid": seeded["subids"]["zebracorn"][:2],
        "conversions/conversion_id": conversion_ids(db, secret.id)[:2],
    }
    assert all(probes.values()), probes
    ids = {
        "campaign": secret.id,
        "stream": "|".join(map(str, seeded["secret_streams"])),
        "offer": seeded["secret_offer"].id,
        "lander": seeded["secret_lander"].id,
    }
    patterns = [
        re.compile(rf"/campaigns/(?:{ids['campaign']})(?![0-9])"),
        re.compile(rf"/streams/(?:{ids['stream']})(?![0-9])"),
        re.compile(rf"/offers/(?:{ids['offer']})(?![0-9])"),
        re.compile(rf"/landers/(?:{ids['lander']})(?![0-9])"),
        re.compile(rf"\"campaign_id\": ?{ids['campaign']}(?![0-9])"),
        re.compile(rf"\"stream_id\": ?(?:{ids['stream']})(?![0-9])"),
        re.compile(rf"\"offer_id\": ?{ids['offer']}(?![0-9])"),
        re.compile(rf"[?&;](?:f\.)?campaign(?:_id)?=(?:{ids['campaign']}|{secret.alias})(?![0-9a-z])"),
    ]
    forbidden = [
        SECRET,  # Names, aliases, URLs, stream names, the domain, the targets, the tids.
        secret.token,
        *seeded["subids"]["zebracorn"],
    ]
    assert all(forbidden) and secret.token

    # A buyer shared it to edit, a viewer shared it to see: each crawls it all, on the same server.
    def crawl(name: str, scope: str, *, hides_money: bool = False) -> None:
        _, api_key = create_api_key(db, name, scope)
        leaks = Leaks(forbidden, patterns)
        money = Amounts()

        status, headers, body = post(admin_port, "/panel/login", {"name": name, "password": PASSWORD})
        assert status == 303, body
        cookie = cookie_of(headers)

        def get(url: str) -> tuple[int, str]:
            auth = {"X-Api-Key": api_key} if url.startswith("/api") else {"Cookie": cookie}
            status, _, body = request(admin_port, url, auth)
            return status, body.decode("utf-8", "replace")

        templates = routes(settings, db)
        assert "/panel/landers" in templates and "/api/v1/campaigns" in templates
        queue: deque[str] = deque()
        for template in templates:
            queue.extend(fill(template, values))
            # The unshared campaign's objects, asked for by their ids and names: refused, naming nothing.
            for segment_before, part in _parts(template):
                match = FIELD.fullmatch(part)
                key = f"{segment_before}/{match.group(1)}" if match else ""
                if key in probes and sum(1 for _, p in _parts(template) if FIELD.fullmatch(p)) == 1:
                    for value in probes[key]:
                        url = template.replace(part, urllib.parse.quote(str(value)))
                        status, body = get(url)
                        assert status in (403, 404), f"{url}: {status}"
                        leaks.check(url, status, body, asked=str(value))
        # Lists filtered on the unshared campaign: empty (or refused), though they say back the filter asked.
        for url in (
            f"/api/v1/reports?group=campaign,offer&campaign={secret.alias}",
            f"/api/v1/clicks?campaign={secret.id}",
            f"/api/v1/conversions?campaign={secret.id}",
            f"/panel/reports?g1=campaign&g2=stream&f.campaign={secret.id}",
            f"/panel/reports.csv?g1=lander&f.campaign={secret.id}",
            f"/panel/clicks?campaign={secret.id}",
            f"/panel/conversions?campaign={secret.id}",
            f"/panel/clicks.csv?campaign={secret.id}",
            # A drill step is the URL's: one naming the unshared campaign's offer or lander names nothing.
            f"/panel/reports?g1=offer&g2=campaign&d1={seeded['secret_offer'].id}",
            f"/panel/reports?g1=lander&g2=campaign&d1={seeded['secret_lander'].id}",
        ):
            status, body = get(url)
            leaks.check(url, status, body, asked=url.rpartition("=")[2])
        # Groupings that cross campaigns, beyond the links the pages carry.
        queue.extend(
            [
                "/api/v1/reports?group=campaign,stream,offer,lander",
                "/api/v1/reports?group=lander,campaign",
                "/api/v1/reports?group=source,campaign",
                "/api/v1/reports?group=offer,stream",
                "/api/v1/clicks?limit=100",
                "/api/v1/conversions?limit=100",
                "/panel/reports?g1=lander&g2=campaign",
                "/panel/reports?g1=offer&g2=stream",
                "/panel/reports?g1=source&g2=campaign",
                "/panel/reports.csv?g1=stream",
            ]
        )
        seen: set[str] = set()
        variants: dict[str, int] = {}

        def wanted(url: str) -> bool:
            if url in seen or url.startswith(("/panel/static", "/panel/logout")):
                return False
            path = url.split("?")[0]
            return "?" not in url or variants.get(path, 0) < MAX_VARIANTS

        while queue and len(seen) < MAX_REQUESTS:
            url = queue.popleft()
            if not wanted(url):
                continue
            if "?" in url:
                variants[url.split("?")[0]] = variants.get(url.split("?")[0], 0) + 1
            seen.add(url)
            status, body = get(url)
            leaks.check(url, status, body)
            if hides_money and status == 200 and url.startswith("/panel"):
                money.check(url, body)
            if status == 200 and url.startswith("/panel"):
                queue.extend(links(body))
            elif status == 400 and url.startswith("/api") and "?" not in url:
                queue.append(f"{url}?campaign={shared.alias}")  # A list a buyer asks per campaign.
        # The bulk forms' previews, asked about the unshared campaign's zone and offer: nothing of them.
        token = re.search(r'name="csrf_token" value="([^"]+)"', get("/panel")[1]).group(1)
        period = [("from", "2000-01-01"), ("to", "2099-12-31")]
        may_edit = scope == "write"
        for path, pairs, expected in (
            (
                f"/panel/campaigns/{shared.id}/costs/paste",
                [("paste", "7\t1\n8\t2"), ("parameter", "zone"), *period],
                200 if may_edit else 403,
            ),
            ("/panel/offers/bulk", [("ids", str(seeded["secret_offer"].id)), ("status", "paused")], 404),
            (
                "/panel/offers/bulk",
                [("ids", str(seeded["shared_offer"].id)), ("find", "open"), ("replace", "x")],
                200 if may_edit else 403,
            ),
        ):
            body = urllib.parse.urlencode([("csrf_token", token), ("do", "preview"), *pairs]).encode()
            headers = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
            status, _, answer = request(admin_port, path, headers, "POST", body)
            assert status == expected or (expected == 404 and not may_edit and status == 403), (path, status)
            leaks.check(path, status, answer.decode("utf-8", "replace"))
        assert not [url for url in queue if wanted(url)], f"the crawl stopped at {MAX_REQUESTS} requests"
        print(f"{name} crawled {len(seen)} URLs:", *sorted({url.split("?")[0] for url in seen}), sep="\n")
        assert not money.found, f"{name} hides money:\n" + "\n".join(money.found[:20])
        if hides_money:  # The crawl met every list's CSV, where the amounts' columns would be.
            assert {"/panel/offers.csv", "/panel/sources.csv", "/panel/campaigns.csv"} <= {
                url.split("?")[0] for url in seen
            }
        assert not leaks.found, (
            f"{name}:\n" + "\n\n".join(leaks.found[:20]) + f"\n\n({len(leaks.found)} in all)"
        )
        # The crawl saw the shared campaign's things, so it was looking where they are.
        status, body = get(f"/panel/landers/{seeded['lander'].id}")
        assert status == 200 and "opencamp" in body
        status, body = get("/panel/clicks")
        assert status == 200 and seeded["subids"]["opencamp"][0] in body
        status, body = get(f"/api/v1/conversions?campaign={shared.alias}")
        assert f"/api/v1/conversions?campaign={shared.alias}" in seen
        assert status == 200 and seeded["subids"]["opencamp"][1] in body, body
        assert json.loads(get("/api/v1/campaigns")[1])["items"][0]["alias"] == "opencamp"

    crawl("bert", "write")
    crawl("vera", "read")
    crawl("hugo", "read", hides_money=True)
