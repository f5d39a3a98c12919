"""The simulate-a-visitor fragment in a real headless Chromium against a real `lanner serve`: its form
swaps the trace in with htmx (the campaign editor embeds the same fragment), no page load."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_the_simulate_form_swaps_in_the_trace_without_leaving_the_page(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import add_stream, create_campaign

    create_campaign(db, "Geo", "geo", offer_url="https://main.example/?c={subid}")
    add_stream(db, "geo", type="intercepting", name="UK only", offers=[(1, 100)], filters=["country=GB"])
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    browser.get(base + "/panel/login?next=/panel/campaigns/1/simulate")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    # The login's answer sends the browser on: wait for the page, not a race with the cookie.
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.NAME, "ua"))
    page = browser.current_url
    assert page == base + "/panel/campaigns/1/simulate"
    browser.execute_script("document.body.dataset.marker = 'same page'")  # Gone if the page reloads.
    browser.find_element(By.NAME, "ua").send_keys("Mozilla/5.0 (X11; Linux x86_64)")
    browser.find_element(By.ID, "run-simulation").click()
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "section.simulate .trace"))
    assert (
        browser.current_url == page
        and browser.execute_script("return document.body.dataset.marker") == "same page"
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "section.simulate")) == 1
    failing = browser.find_element(By.CSS_SELECTOR, ".verdicts li.fail").text
    assert "FAIL" in failing and "country=GB" in failing and "saw unknown" in failing
    # Standalone, each stream's name, type, ":" and verdict read on one line, as in the editor.
    stream = browser.find_element(By.CSS_SELECTOR, ".trace li.stream")
    assert "(intercepting): no match" in stream.text, stream.text
    parts = stream.find_elements(By.CSS_SELECTOR, "strong, .verdict")
    middles = [part.rect["y"] + part.rect["height"] / 2 for part in parts]
    assert len(parts) == 2 and max(middles) - min(middles) < 6, (stream.text, middles)  # A line is ~20 px.
