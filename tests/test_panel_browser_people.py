"""The per-user timezone in a real headless Chromium: the dashboard chart's time axis is drawn in the
user's timezone (panel.js gives uPlot the chart JSON's `timezone`), not the browser's or UTC."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_the_chart_s_times_are_the_user_s_local_times(browser, start_server, db):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user

    # Half past in UTC: a chart drawn in UTC (or the browser's zone) would start its day at 18:30.
    add_user(db, "ravi", "admin", PASSWORD, timezone="Asia/Kolkata")
    server = start_server(workers=1)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 20)

    browser.get(base + "/panel/login")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("ravi")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    over = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart .u-over")))
    assert "Asia/Kolkata" in browser.find_element(By.CSS_SELECTOR, ".periods .tz").text
    # The cursor on the chart's left edge: the legend names the first bucket, the user's midnight.
    ActionChains(browser).move_to_element_with_offset(over, -over.size["width"] // 2 + 2, 0).perform()
    first = browser.find_element(By.CSS_SELECTOR, "#chart .u-legend .u-series:first-child .u-value")
    wait.until(lambda _: first.text not in ("", "--"))
    assert first.text.endswith("12:00am"), first.text
