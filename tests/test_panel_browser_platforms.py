"""An ad platform connection made in a real headless Chromium against a real `lanner serve`, its test
event answered by a local fake of Meta's Conversions API, then paused from its page; then a spend
connection made on the same page, its "Sync now" queued from its page and run by a real `lanner worker`
against a local fake of PropellerAds, the page's log showing the run when it lands."""

from __future__ import annotations

from conftest import browser_required
from platform_fakes import META_PIXEL, META_TOKEN, PlatformFake
from spend_fakes import PROPELLER_TOKEN, SpendFake

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_connection_made_on_the_page_sends_its_test_event_and_pauses_and_spend_syncs_now(
    browser, start_server, start_consumer, db
):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import create_campaign
    from models.admin.sources import create_source

    fake, spend_fake = PlatformFake(), SpendFake()
    try:
        create_source(db, "Push", "zone={zoneid}")
        create_campaign(db, "Summer", "summer", offer_url="https://shop.example/?sub1={subid}", source="Push")
        add_user(db, "anna", "admin", PASSWORD)
        server = start_server(
            workers=1, admin=True, LANNER_META_API_URL=fake.base, LANNER_PROPELLERADS_API_URL=spend_fake.base
        )
        base = f"http://127.0.0.1:{server.extra['admin_port']}"
        wait = WebDriverWait(browser, 60)
        browser.get(base + "/panel/login?next=/panel/postbacks")
        browser.find_element(By.ID, "name").send_keys("anna")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        browser.find_element(By.ID, "login").click()
        wait.until(lambda b: b.find_elements(By.ID, "platforms-link"))
        browser.find_element(By.ID, "platforms-link").click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "details.new-platform summary"))
        browser.find_element(By.CSS_SELECTOR, "details.new-platform summary").click()
        browser.find_element(By.ID, "platform-name").send_keys("fb")
        Select(browser.find_element(By.ID, "platform-kind")).select_by_visible_text("meta")
        Select(browser.find_element(By.ID, "platform-scope")).select_by_visible_text(
            "campaign Summer (summer)"
        )
        browser.find_element(By.ID, "platform-pixel_id").send_keys(META_PIXEL)
        browser.find_element(By.ID, "platform-access_token").send_keys(META_TOKEN)
        browser.find_element(By.ID, "create-platform").click()
        wait.until(lambda b: b.current_url.endswith("/panel/platforms/1?done=created"))
        main = browser.find_element(By.TAG_NAME, "main").text
        assert "****" + META_TOKEN[-4:] in main and META_TOKEN not in browser.page_source

        browser.find_element(By.ID, "test-platform").click()
        wait.until(lambda b: b.find_elements(By.ID, "test-result"))
        assert "Test event accepted" in browser.find_element(By.ID, "test-result").text
        assert len(fake.events("meta")) == 1

        browser.find_element(By.ID, "pause-platform").click()
        wait.until(lambda b: b.current_url.endswith("done=paused"))
        assert browser.find_element(By.ID, "platform-status").text == "paused"
        assert browser.find_elements(By.ID, "resume-platform")

        day = add_zone_click(db, "4417")
        spend_fake.rows["propellerads"] = [
            {"date_time": day, "campaign_id": 7001, "zone_id": 4417, "spent": 0.42}
        ]
        browser.get(base + "/panel/platforms")
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "details.new-spend summary"))
        browser.find_element(By.CSS_SELECTOR, "details.new-spend summary").click()
        browser.find_element(By.ID, "spend-name").send_keys("pa")
        Select(browser.find_element(By.ID, "spend-kind")).select_by_visible_text("propellerads")
        browser.find_element(By.ID, "spend-parameter").send_keys("zone")
        browser.find_element(By.ID, "spend-api_token").send_keys(PROPELLER_TOKEN)
        browser.find_element(By.ID, "spend-new-mappings").send_keys("7001=summer")
        browser.find_element(By.ID, "create-spend").click()
        wait.until(lambda b: b.current_url.endswith("/panel/platforms/spend/1?done=created"))
        assert PROPELLER_TOKEN not in browser.page_source
        browser.find_element(By.ID, "sync-spend").click()
        wait.until(lambda b: "done=queued" in b.current_url)
        assert "Queued" in browser.find_element(By.TAG_NAME, "main").text
        assert "No syncs yet." in browser.find_element(By.ID, "spend-log").text  # Nothing ran in the request.
        start_consumer(LANNER_PROPELLERADS_API_URL=spend_fake.base)

        # The page's log looks again by itself until the worker's run lands (each look swaps the element:
        # one read between its find and its text is stale, and read again).
        def log_text(b) -> str:
            try:
                return b.find_element(By.ID, "spend-log").text
            except StaleElementReferenceException:
                return ""

        wait.until(lambda b: "done" in log_text(b))
        wait.until(lambda b: " 1 " in f" {log_text(b)} ")  # 1 row read, 1 cost written.
    finally:
        fake.close()
        spend_fake.close()


def add_zone_click(db, zone: str) -> str:
    """A click of campaign summer in `zone` a minute ago; its UTC day."""
    import time
    import zlib
    from datetime import UTC, datetime

    from models.clicks.record import new_subid
    from models.tables.campaign import Campaign
    from models.tables.click import Click

    created_at = int(time.time() * 1000) - 60_000
    Click.create(
        subid=new_subid(),
        created_at=created_at,
        campaign_id=Campaign.get(Campaign.alias == "summer").id,
        stream_id=None,
        offer_id=None,
        ip="203.0.113.7",
        user_agent="Mozilla/5.0",
        ua_hash=zlib.crc32(b"Mozilla/5.0"),
        country="DE",
        sub_id_1=zone,
    )
    return datetime.fromtimestamp(created_at / 1000, UTC).date().isoformat()
