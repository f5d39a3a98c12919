"""The exchange rates page in a real headless Chromium against a real `lanner serve` reading a local fake of
the ECB's feed: an admin sets a rate by hand for a day, then fetches the feed, which keeps it."""

from __future__ import annotations

from conftest import browser_required
from test_rates import DAY_1, DAY_2, ecb, ecb_xml  # noqa: F401

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_an_admin_sets_a_rate_and_fetches_the_feed_from_the_rates_page(browser, start_server, db, ecb):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user

    add_user(db, "anna", "admin", PASSWORD)
    ecb.body = ecb_xml({DAY_1: {"USD": 1.25, "GBP": 0.8}, DAY_2: {"USD": 1.1, "GBP": 0.88}})
    server = start_server(workers=1, admin=True, LANNER_EXCHANGE_RATE_URL=ecb.url)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/offers")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "rates-link"))).click()
    wait.until(seen.presence_of_element_located((By.ID, "rate-form")))
    browser.find_element(By.ID, "rate-currency").send_keys("gbp")
    browser.find_element(By.ID, "rate-value").send_keys("1.3")
    # The date input takes the browser's locale order (en-US here), as the costs page's test types it.
    browser.find_element(By.ID, "rate-day").send_keys(DAY_2.strftime("%m/%d/%Y"))
    browser.find_element(By.ID, "set-rate").click()
    notice = wait.until(seen.presence_of_element_located((By.ID, "rates-notice"))).text
    assert notice == f"1 GBP = 1.3 USD from {DAY_2.isoformat()}."
    browser.find_element(By.ID, "fetch-rates").click()
    wait.until(seen.text_to_be_present_in_element((By.ID, "rates-notice"), "Rates for"))
    notice = browser.find_element(By.ID, "rates-notice").text
    assert notice.startswith(
        f"Rates for {DAY_1.isoformat()} to {DAY_2.isoformat()}: 3 new or changed, 1 kept"
    )
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#latest-rates tbody tr")]
    assert rows == [f"EUR 1.1 {DAY_2.isoformat()} 127.0.0.1", f"GBP 1.3 {DAY_2.isoformat()} panel (by hand)"]
    history = browser.find_elements(By.CSS_SELECTOR, "#rate-history tbody tr")
    assert len(history) == 4 and ecb.hits == 1
