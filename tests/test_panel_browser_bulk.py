"""Bulk work and the dashboard in a real headless Chromium against one real `lanner serve`: zone costs
pasted, previewed, applied and then read in the report by zone; the dashboard refreshed by its button and
by its opt-in auto-refresh, each swapping the new numbers in without loading the page again."""

from __future__ import annotations

import pytest
from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = [browser_required, pytest.mark.long]  # The auto-refresh's shortest poll is 10 s.


def test_zone_costs_are_pasted_previewed_applied_and_reported_and_the_dashboard_refreshes(
    browser, start_server, db, settings, make_tracker
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait
    from test_costs import zone_clicks

    from models.accounts.users import add_user
    from workers.bench.generate import generate_clicks

    zone_clicks(
        db,
        settings,
        make_tracker,
        {"north": [("4417", False)] * 3 + [("4418", False), ("4419", False)]},
    )
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/campaigns/1/costs")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.element_to_be_clickable((By.ID, "paste-costs"))).click()

    # Paste: the period once, a column out of a source's stats with a zone it does not know and a header.
    wait.until(seen.presence_of_element_located((By.ID, "paste-form")))
    browser.find_element(By.ID, "paste-from").send_keys("01/01/2000")
    browser.find_element(By.ID, "paste-to").send_keys("12/31/2099")
    # Set as a paste from the clipboard would (typed, a tab would move the focus on).
    text = browser.find_element(By.ID, "paste-text")
    browser.execute_script(
        "arguments[0].value = arguments[1];", text, "zone\tspend\n4417\t30\n4418\t4.50\n9999\t2\n"
    )
    browser.find_element(By.ID, "paste-preview").click()
    wait.until(seen.presence_of_element_located((By.ID, "paste-lines")))
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#paste-lines tbody tr")]
    assert rows[0].startswith("1 zone") and "bad" in rows[0] and "not an amount" in rows[0]
    assert rows[1].startswith("2 4417 30.00 USD new 3") and rows[2].startswith("3 4418 4.50 USD new 1")
    assert "unknown" in rows[3] and "no clicks with zoneid=9999" in rows[3]
    assert db.execute_sql("SELECT COUNT(*) FROM cost_entry").fetchone()[0] == 0  # Nothing set yet.
    browser.find_element(By.ID, "paste-apply").click()
    result = wait.until(seen.presence_of_element_located((By.ID, "paste-result"))).text
    assert "2 zone costs set, 34.50 USD in all, over 4 clicks; 2 lines not set" in result

    # The report by zone, from the result's link, shows each zone's cost.
    browser.find_element(By.ID, "paste-report").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.report tbody tr")))
    report = {
        row.find_element(By.CSS_SELECTOR, "td").text.split("\n")[0]: row.text
        for row in browser.find_elements(By.CSS_SELECTOR, "table.report tbody tr")
    }
    assert "30.00" in report["4417"] and "4.50" in report["4418"] and "0.00" in report["4419"], report

    # The dashboard: the Refresh button swaps the new numbers in; the page itself is not loaded again.
    def clicks_tile() -> str:
        # One script, not find-then-read: a swap between the two would leave a stale element.
        return browser.execute_script(
            "const tile = document.querySelector('#dashboard .tile strong'); return tile && tile.textContent;"
        )

    browser.get(base + "/panel?chart=clicks,cost")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
    assert clicks_tile() == "0"  # The pasted zones' clicks are on the test clock's day, not today.
    assert "Cost (USD)" in browser.find_element(By.CSS_SELECTOR, "#chart .u-legend").text
    browser.execute_script("window.lannerTestMarker = 'same page';")
    generate_clicks(db, 7, 0.0001, campaigns=1, seed=1)
    browser.find_element(By.ID, "refresh").click()
    wait.until(lambda _: clicks_tile() == "7")
    assert browser.execute_script("return window.lannerTestMarker") == "same page"
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))  # Drawn again.
    assert "Cost (USD)" in browser.find_element(By.CSS_SELECTOR, "#chart .u-legend").text

    # Auto-refresh, chosen in the options form: it stays in the URL and polls by itself.
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(By.ID, "dashboard-refresh")).select_by_value("10")
    browser.find_element(By.ID, "dashboard-show").click()
    wait.until(lambda _: "refresh=10" in browser.current_url)
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
    assert "chart=clicks%2Ccost" in browser.current_url or "chart=clicks&chart=cost" in browser.current_url
    browser.execute_script("window.lannerTestMarker = 'polled page';")
    generate_clicks(db, 3, 0.0001, campaigns=1, seed=2)
    wait.until(lambda _: clicks_tile() == "10")
    assert browser.execute_script("return window.lannerTestMarker") == "polled page"
