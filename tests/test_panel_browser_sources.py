"""The traffic sources page in a real headless Chromium against a real `lanner serve`: a source started
from the catalogue, saved, and picked on the campaign editor, whose URL then carries its placeholders."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def test_a_source_from_the_catalogue_is_saved_and_picked_for_a_campaign(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import create_campaign, get_campaign

    create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}")
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/sources")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "source-list")))
    assert "No traffic sources yet." in browser.find_element(By.ID, "source-list").text

    browser.find_element(By.CSS_SELECTOR, "details.new-source summary").click()
    Select(browser.find_element(By.ID, "catalogue")).select_by_value("richads")
    browser.find_element(By.ID, "use-catalogue").click()
    wait.until(seen.presence_of_element_located((By.ID, "catalogue-note")))
    template = browser.find_element(By.ID, "source-template").get_attribute("value")
    assert template.startswith("publisher=[PUBLISHER_ID]&") and template.endswith("external_id=[CLICK_ID]")
    name = browser.find_element(By.ID, "source-name")
    name.clear()
    name.send_keys("RichAds push")
    browser.find_element(By.ID, "source-slots").send_keys("publisher=5")
    browser.find_element(By.ID, "create-source").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.source-parameters")))
    assert browser.find_element(By.CSS_SELECTOR, "p.saved").text == "Created."
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.source-parameters td")]
    assert cells[:3] == ["publisher", "[PUBLISHER_ID]", "sub_id_5"]

    browser.get(base + "/panel/campaigns/1")
    Select(wait.until(seen.presence_of_element_located((By.ID, "campaign-source")))).select_by_visible_text(
        "RichAds push"
    )
    browser.find_element(By.ID, "campaign-source").find_element(By.XPATH, "ancestor::form").submit()
    wait.until(seen.presence_of_element_located((By.ID, "campaign-source-note")))
    url = browser.find_element(By.ID, "campaign-url").get_attribute("value")
    assert url.endswith("/push?" + template)
    assert get_campaign(db, "push").source_id == 1
