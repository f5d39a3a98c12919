"""The report's "push the blacklist to the source": in a real headless Chromium against a real `lanner
serve` and the local fake of PropellerAds' excluded zones (tests/spend_fakes.py, enforcing the endpoint's
contract), the source's answer shown on the report, then its refusal; in process, who gets the button
(the API's rule: the right to change the campaign) and the sentence shown where no connection maps it."""

from __future__ import annotations

import time

import pytest
from conftest import Clock, InProcessApp, browser_required
from platform_fakes import Scripted
from spend_fakes import PROPELLER_TOKEN, SpendFake
from test_panel import PASSWORD, csrf_token, get, log_in, post
from test_rules import HOUR, land, push_campaign  # noqa: F401 (a fixture)

from models.accounts.sharing import share_campaign
from models.accounts.users import add_user
from models.optimisation.labels import scope_of, set_labels
from models.reporting.spend.connections import create_spend_connection, map_ids
from models.tables.campaign import Stream, StreamOffer

# ruff: noqa: F811 (the fixture imported above, taken as an argument)

PLATFORM_CAMPAIGN = "5001"
ZONES = ("1001", "1002", "1003", "site-x")


@pytest.fixture(scope="module")
def fake():
    server = SpendFake()
    yield server
    server.close()


@pytest.fixture
def zones(db, push_campaign, fake):
    """Campaign push (zoneid is sub_id_1) with a click an hour ago from each of ZONES; the fake's
    campaign 5001 excludes zone 99 (the buyer's own, by hand)."""
    fake.reset()
    fake.excluded[PLATFORM_CAMPAIGN] = [99]
    stream_id = Stream.get(Stream.campaign == push_campaign.id).id
    offer_id = StreamOffer.get(StreamOffer.stream == stream_id).offer_id
    for zone in ZONES:
        land(
            db,
            push_campaign.id,
            1,
            0.5,
            at=time.time() - HOUR,
            sub_id_1=zone,
            stream_id=stream_id,
            offer_id=offer_id,
        )
    return push_campaign


def connect(db) -> None:
    create_spend_connection(
        db, "propeller", "propellerads", source="PropellerAds", credentials={"api_token": PROPELLER_TOKEN},
        parameter="zoneid",
    )  # fmt: skip
    map_ids(db, "propeller", {PLATFORM_CAMPAIGN: "push"})


def report(campaign) -> str:
    return f"/panel/reports?g1=zoneid&f.campaign={campaign.id}&period=last_30_days&sort=group"


@browser_required
def test_pressing_push_sends_the_ticked_blacklist_to_propellerads_and_shows_its_answer_then_its_refusal(
    browser, start_server, db, zones, fake
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    connect(db)
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True, LANNER_PROPELLERADS_API_URL=fake.base)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + report(zones))
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "push-blacklist")))
    assert PLATFORM_CAMPAIGN in browser.find_element(By.ID, "push-form").text

    def tick_and_blacklist(values: set[str], labelled: int) -> None:
        for tick in browser.find_elements(By.CSS_SELECTOR, "table.report input[name=values]"):
            if tick.get_attribute("value") in values:
                tick.click()
        browser.find_element(By.ID, "blacklist").click()
        wait.until(lambda _: len(browser.find_elements(By.CSS_SELECTOR, "td.label.blacklist")) == labelled)

    tick_and_blacklist({"1001", "1003", "site-x"}, 3)
    browser.find_element(By.ID, "push-blacklist").click()
    wait.until(seen.presence_of_element_located((By.ID, "push-result")))
    said = browser.find_element(By.ID, "push-result")
    assert "ok" in said.get_attribute("class").split()
    assert said.text.startswith("Pushed: 2 zone id(s) of the zoneid blacklist sent.")
    assert f"campaign {PLATFORM_CAMPAIGN}: 2 zone(s) added: 200" in said.text
    assert "Not zone ids, not sent: site-x." in said.text
    assert fake.excluded[PLATFORM_CAMPAIGN] == [99, 1001, 1003]  # The buyer's own zone 99 stays.
    assert "g1=zoneid" in browser.current_url  # Back on the same level.
    browser.refresh()  # The answer is shown once.
    wait.until(seen.presence_of_element_located((By.ID, "push-blacklist")))
    assert browser.find_elements(By.ID, "push-result") == []

    fake.script(Scripted(429, b'{"message": "Too Many Attempts."}', {"Retry-After": "60"}))
    tick_and_blacklist({"1002"}, 4)
    browser.find_element(By.ID, "push-blacklist").click()
    wait.until(seen.presence_of_element_located((By.ID, "push-result")))
    said = browser.find_element(By.ID, "push-result")
    assert "failed" in said.get_attribute("class").split()
    assert said.text.startswith("Not pushed:")
    assert f"answered 429 for campaign {PLATFORM_CAMPAIGN}: Too Many Attempts." in said.text
    assert fake.excluded[PLATFORM_CAMPAIGN] == [99, 1001, 1003]  # Nothing half-done.


def test_only_who_may_change_the_campaign_gets_the_button_and_without_a_connection_the_reason(
    db, zones, fake, env
):
    from app import create_admin_app
    from settings import load_settings

    env["LANNER_PROPELLERADS_API_URL"] = fake.base
    admin = InProcessApp(create_admin_app(load_settings(env), db=db), Clock(time.time()))
    set_labels(db, scope_of(db, "push", None, "zoneid"), ["1001"], "blacklist")
    add_user(db, "anna", "admin", PASSWORD)
    anna = log_in(admin)
    page = get(admin, report(zones), anna)[2]
    assert 'id="push-blacklist"' not in page
    assert "has no active PropellerAds spend connection to pause zones through." in page
    form = {
        "campaign": str(zones.id),
        "param": "zoneid",
        "back": report(zones),
        "csrf_token": csrf_token(page),
    }
    status, headers, _ = post(admin, "/panel/labels/push", form, cookie=anna)
    assert status == 303 and headers["location"] == report(zones)
    page = get(admin, report(zones), f"{anna}; {headers['set-cookie'].split(';')[0]}")[2]
    assert "Not pushed:" in page and "nothing to push the blacklist to." in page

    connect(db)
    add_user(db, "vera", "viewer", PASSWORD)
    share_campaign(db, "push", "vera")
    vera = log_in(admin, "vera")
    page = get(admin, report(zones), vera)[2]
    assert 'id="label-export"' in page and 'id="push-form"' not in page and "push-unavailable" not in page
    status, _, body = post(admin, "/panel/labels/push", {**form, "csrf_token": csrf_token(page)}, cookie=vera)
    assert status == 403 and b"vera may not change this campaign." in body
    # A buyer: the button once the campaign is shared with the right to change it, as the API allows.
    add_user(db, "bruno", "buyer", PASSWORD)
    share_campaign(db, "push", "bruno")
    bruno = log_in(admin, "bruno")
    page = get(admin, report(zones), bruno)[2]
    assert 'id="label-export"' in page and 'id="push-form"' not in page
    status, _, _ = post(admin, "/panel/labels/push", {**form, "csrf_token": csrf_token(page)}, cookie=bruno)
    assert status == 403 and fake.puts == []
    share_campaign(db, "push", "bruno", may_edit=True)
    page = get(admin, report(zones), bruno)[2]
    assert (
        'id="push-blacklist"' in page
        and f"campaign(s) {PLATFORM_CAMPAIGN} through connection propeller" in page
    )
    status, headers, _ = post(
        admin, "/panel/labels/push", {**form, "csrf_token": csrf_token(page)}, cookie=bruno
    )
    assert status == 303 and fake.excluded[PLATFORM_CAMPAIGN] == [99, 1001]
