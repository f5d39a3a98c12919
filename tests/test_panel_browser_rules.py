"""The rules page in a real headless Chromium against a real `lanner serve`: a rule made by its form,
its dry run, paused."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_rule_made_in_the_form_shows_its_dry_run_and_pauses(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.tables.campaign import Campaign
    from models.tables.optimisation import RuleAction
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 200, 2, campaigns=1, seed=3, zone_count=5)
    alias = Campaign.get().alias
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/reports")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.element_to_be_clickable((By.ID, "rules-link"))).click()
    wait.until(seen.presence_of_element_located((By.ID, "rule-list")))
    browser.find_element(By.CSS_SELECTOR, "details.new-rule summary").click()
    fields = {
        "rule-name": "cut zones",
        "rule-campaigns": alias,
        "rule-dimension": "sub_id_1",
        "rule-window": "7d",
        "rule-conditions": "clicks >= 1",
        "rule-max": "2",
    }
    for element_id, value in fields.items():
        box = browser.find_element(By.ID, element_id)
        box.clear()
        box.send_keys(value)
    browser.find_element(By.ID, "create-rule").click()
    wait.until(seen.presence_of_element_located((By.ID, "dry-run")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#dry-run tbody tr")
    assert len(rows) == 2 and all("blacklist" in row.text for row in rows)
    assert "3 held back by its limit" in browser.find_element(By.ID, "dry-run").text
    assert RuleAction.select().count() == 0
    browser.find_element(By.ID, "pause-rule").click()
    wait.until(seen.presence_of_element_located((By.ID, "resume-rule")))
    assert "Paused" in browser.page_source
