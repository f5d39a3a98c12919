"""The web panel in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)
against a real `lanner serve` admin socket on a TCP port the kernel picked: log in, the dashboard's
chart drawn, the campaign list searched, log out. One browser for the whole module."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def painted_pixels(browser) -> int:
    """How many pixels of the dashboard chart's canvas are not transparent."""
    return browser.execute_script(
        """
        const canvas = document.querySelector('#chart canvas');
        if (!canvas || !canvas.width || !canvas.height) return 0;
        const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) painted++;
        return painted;
        """
    )


def test_log_in_see_the_dashboard_chart_search_campaigns_and_log_out(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import update_campaign
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 1, campaigns=2, seed=3)
    update_campaign(db, 1, name="<b>Spring</b> & sale")
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/campaigns")
    wait.until(seen.presence_of_element_located((By.ID, "login")))  # Sent to the login page first.
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys("not the password")
    browser.find_element(By.ID, "login").click()
    alert = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "p.error")))
    assert "wrong" in alert.text
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.campaigns tfoot")))
    assert browser.current_url == base + "/panel/campaigns"
    cookie = browser.get_cookie("lanner_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and cookie["path"] == "/"

    browser.get(base + "/panel?period=last_7_days")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
    wait.until(lambda _: painted_pixels(browser) > 100)
    legend = browser.find_element(By.CSS_SELECTOR, "#chart .u-legend").text
    assert "Clicks" in legend and "Profit" in legend
    campaigns = browser.find_element(By.CSS_SELECTOR, "table.campaigns").text
    assert "<b>Spring</b> & sale" in campaigns  # Escaped, so shown as written, not as markup.
    assert not browser.find_elements(By.CSS_SELECTOR, "table.campaigns b")

    browser.find_element(By.LINK_TEXT, "Campaigns").click()
    wait.until(seen.presence_of_element_located((By.ID, "q")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#campaign-list tbody tr")
    assert len(rows) == 2
    browser.find_element(By.ID, "q").send_keys("gen-1")  # htmx swaps in the filtered list.
    wait.until(lambda _: len(browser.find_elements(By.CSS_SELECTOR, "#campaign-list tbody tr")) == 1)
    assert "gen-1" in browser.find_element(By.ID, "campaign-list").text
    assert "q=gen-1" in browser.current_url
    url = browser.find_element(By.CSS_SELECTOR, "#campaign-list input.copy-source").get_attribute("value")
    assert url == base + "/gen-1"

    browser.find_element(By.ID, "logout").click()
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.get(base + "/panel")
    wait.until(seen.presence_of_element_located((By.ID, "login")))  # The session is gone.
