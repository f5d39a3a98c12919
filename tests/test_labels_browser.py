"""The report builder's tick-and-blacklist in a real headless Chromium against a real `lanner serve`."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_ticking_a_campaigns_zones_and_pressing_blacklist_labels_them(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.optimisation.labels import export_labels, scope_of
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 200, 2, campaigns=1, seed=3, zone_count=5)
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/reports?g1=sub_id_1&f.campaign=1&sort=group")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "blacklist")))
    ticks = browser.find_elements(By.CSS_SELECTOR, "table.report input[name=values]")
    assert [tick.get_attribute("value") for tick in ticks] == ["1000", "1001", "1002", "1003", "1004"]
    ticks[1].click()
    ticks[3].click()
    browser.find_element(By.ID, "blacklist").click()
    wait.until(lambda _: len(browser.find_elements(By.CSS_SELECTOR, "td.label.blacklist")) == 2)
    labels = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "table.report tbody td.label")]
    assert labels == ["", "blacklist", "", "blacklist", ""]
    assert "g1=sub_id_1" in browser.current_url  # Back on the same level.
    assert export_labels(db, scope_of(db, "1", None, "sub_id_1"), "blacklist", "plain") == "1001\n1003\n"
