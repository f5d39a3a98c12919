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
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

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


def test_a_new_api_key_is_shown_once_and_a_reload_neither_shows_it_nor_makes_another(
    browser, start_server, db
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.apikeys import list_api_keys
    from models.accounts.users import add_user

    add_user(db, "anna", "admin", PASSWORD)
    bert = add_user(db, "bert", "buyer", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + f"/panel/users/{bert.id}")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    form = wait.until(
        seen.presence_of_element_located((By.CSS_SELECTOR, f"form[action='/panel/users/{bert.id}/keys']"))
    )
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    key = wait.until(seen.presence_of_element_located((By.ID, "new-key"))).get_attribute("value")
    assert key.startswith("lnr_") and browser.current_url == base + f"/panel/users/{bert.id}"
    assert browser.get_cookie("lanner_flash") is None  # Taken by the page that showed it.
    browser.refresh()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.keys")))
    assert not browser.find_elements(By.ID, "new-key") and key not in browser.page_source
    assert len([k for k in list_api_keys(db) if k.user_id == bert.id]) == 1
