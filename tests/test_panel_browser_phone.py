"""The panel on a phone (390 px wide) in a real headless Chromium: the dashboard and the campaign list
fit the screen (nothing scrolls sideways), the campaigns are cards, the nav is one scrolling row with
the current page in view. The run's browser is resized back to 1280x900 afterwards."""

from __future__ import annotations

import pytest
from conftest import browser_required

PASSWORD = "correct horse battery"
PHONE = (390, 844)
pytestmark = browser_required

OVERFLOW = "return [document.documentElement.scrollWidth, document.documentElement.clientWidth];"


@pytest.fixture
def phone(browser):
    browser.set_window_size(*PHONE)
    yield browser
    browser.set_window_size(1280, 900)


def test_the_dashboard_and_the_campaign_list_fit_a_phone_and_the_campaigns_are_cards(phone, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import update_campaign
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 1, campaigns=2, seed=3)
    update_campaign(db, 1, name="Black Friday " + "x" * 60 + " (long name, no spaces to wrap at)")
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(phone, 60)

    phone.get(base + "/panel/login")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    phone.find_element(By.ID, "name").send_keys("anna")
    phone.find_element(By.ID, "password").send_keys(PASSWORD)
    phone.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#chart canvas")))
    width, shown = phone.execute_script(OVERFLOW)
    assert shown <= PHONE[0] and width <= shown, (width, shown)
    assert phone.find_element(
        By.CSS_SELECTOR, ".tables table.campaigns thead"
    ).is_displayed()  # Still a table.

    phone.get(base + "/panel/campaigns")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.campaigns tfoot")))
    width, shown = phone.execute_script(OVERFLOW)
    assert width <= shown, (width, shown)
    assert not phone.find_element(By.CSS_SELECTOR, "table.campaigns thead").is_displayed()
    cards = phone.find_elements(By.CSS_SELECTOR, "table.campaigns tbody tr")
    assert len(cards) == 2 and all(card.value_of_css_property("display") == "grid" for card in cards)
    # Each card: its name, the numbers with their labels, the URL to copy and the pause button, on screen.
    card = cards[0]
    labels = phone.execute_script(
        "return [...arguments[0].querySelectorAll('td.n')].map(td => getComputedStyle(td, "
        "'::before').content);",
        card,
    )
    assert labels[:2] == ['"Clicks"', '"Unique"'] and '"Profit"' in labels and "Pause" in card.text
    for part in ("td.name", "td.url input", "td.url button.copy", "td.row-actions button"):
        box = card.find_element(By.CSS_SELECTOR, part).rect
        assert box["x"] >= 0 and box["x"] + box["width"] <= shown, (part, box)

    # The nav scrolls on its own; the current page's link (the last one: an admin's Status) is in its
    # visible part.
    phone.get(base + "/panel/status")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".top nav a[aria-current]")))
    width, shown = phone.execute_script(OVERFLOW)
    assert width <= shown, (width, shown)
    nav, link = phone.execute_script(
        "const nav = document.querySelector('.top nav'), a = nav.querySelector('a[aria-current]');"
        "return [nav.getBoundingClientRect().toJSON(), a.getBoundingClientRect().toJSON()];"
    )
    # Within a pixel: scrollLeft and the scroll width are whole pixels, the links' widths fractional (the
    # last link, scrolled as far as the nav goes, may end 0.2 px past it).
    assert link["left"] >= nav["left"] - 1 and link["right"] <= nav["right"] + 1, (nav, link)
