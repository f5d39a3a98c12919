"""An ad platform connection made in a real headless Chromium against a real `lanner serve`, its test
event answered by a local fake of Meta's Conversions API, then paused from its page."""

from __future__ import annotations

from conftest import browser_required
from platform_fakes import META_PIXEL, META_TOKEN, PlatformFake

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_connection_made_on_the_page_sends_its_test_event_and_pauses(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import create_campaign

    fake = PlatformFake()
    try:
        create_campaign(db, "Summer", "summer", offer_url="https://shop.example/?sub1={subid}")
        add_user(db, "anna", "admin", PASSWORD)
        server = start_server(workers=1, admin=True, LANNER_META_API_URL=fake.base)
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
    finally:
        fake.close()
