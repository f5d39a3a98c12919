"""The costs page in a real headless Chromium against a real `lanner serve`: a spend typed for one zone by the
traffic source's own parameter name, then for every campaign of the source, each listed with its scope."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_zone_spend_and_a_source_spend_are_set_from_the_form(
    browser, start_server, db, settings, make_tracker
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait
    from test_costs import zone_clicks

    from models.accounts.users import add_user

    zone_clicks(
        db,
        settings,
        make_tracker,
        {
            "north": [("1", False)] * 3 + [("1", True), ("2", False)],
            "south": [("1", False)],
        },
    )
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/campaigns/1/costs")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "cost-form")))

    def spend(amount: str, zone: str, scope: str) -> str:
        for field, value in (("cost-from", "01/01/2000"), ("cost-to", "12/31/2099")):
            browser.find_element(By.ID, field).send_keys(value)
        browser.find_element(By.ID, "cost-amount").send_keys(amount)
        browser.find_element(By.ID, "cost-sub-zoneid").clear()
        browser.find_element(By.ID, "cost-sub-zoneid").send_keys(zone)
        Select(browser.find_element(By.ID, "cost-scope")).select_by_value(scope)
        browser.find_element(By.ID, "set-cost").click()
        return wait.until(seen.presence_of_element_located((By.ID, "cost-result"))).text

    assert "spread over 3 clicks with zoneid=1" in spend("30", "1", "campaign")
    assert "1 bot clicks at 0" in browser.find_element(By.ID, "cost-result").text
    browser.get(base + "/panel/campaigns/1/costs")  # A fresh form: the date fields empty again.
    wait.until(seen.presence_of_element_located((By.ID, "cost-form")))
    assert "spread over 4 clicks of Propeller's campaigns with zoneid=1" in spend("8", "1", "source")
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#cost-entries tbody tr")]
    assert rows[0].startswith("every campaign of Propeller zoneid=1") and len(rows) == 1  # Covers north's.
    sql = "SELECT campaign_id, is_bot, cost FROM click WHERE sub_id_1 = '1' ORDER BY id"
    zone_costs = db.execute_sql(sql)
    assert [tuple(row) for row in zone_costs.fetchall()] == [(1, 0, 2.0)] * 3 + [(1, 1, 0.0), (2, 0, 2.0)]
