"""The domains page in a real headless Chromium against a real `lanner serve` and `lanner worker`: a
domain added in the panel gets its certificate from the worker's `get_certificate` task, and the page
shows why it failed (this test's install has rendered no nginx site: no certbot can run)."""

from __future__ import annotations

import time

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_domain_added_in_the_panel_shows_the_worker_s_certificate_attempt(
    browser, start_server, start_consumer, db
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import create_campaign

    create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}")
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    worker = start_consumer()
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/status")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.element_to_be_clickable((By.ID, "domains-link"))).click()
    wait.until(seen.presence_of_element_located((By.ID, "domain-list")))
    assert "No domains yet" in browser.find_element(By.ID, "domain-list").text

    browser.find_element(By.CSS_SELECTOR, "details.new-domain summary").click()
    browser.find_element(By.ID, "domain-name").send_keys("Track.Example.com")
    Select(browser.find_element(By.ID, "domain-campaign")).select_by_visible_text("push")
    browser.find_element(By.ID, "domain-redirect").click()
    browser.find_element(By.ID, "add-domain").click()
    wait.until(seen.presence_of_element_located((By.ID, "cert-state")))
    assert "the worker gets its certificate" in browser.find_element(By.CSS_SELECTOR, "p.saved").text

    deadline = time.monotonic() + 30
    while "failed" not in browser.find_element(By.ID, "cert-state").text:  # The worker's task ran.
        assert time.monotonic() < deadline and worker.process.poll() is None, worker.log
        time.sleep(0.2)
        browser.refresh()
    assert "lanner nginx site -o PATH" in browser.find_element(By.ID, "cert-error").text

    browser.get(base + "/panel/domains")
    row = browser.find_element(By.CSS_SELECTOR, "#domain-list tbody tr").text
    assert "track.example.com" in row and "push" in row and "failed" in row
