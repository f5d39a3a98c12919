"""Column sets in a real headless Chromium against a real `lanner serve`: columns added and moved with the
chooser's buttons, saved as the default set, found again after logging out and in; then a row ticked
and the total without it, against the rows the page shows."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def whole(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_saved_set_is_restored_after_a_new_login_and_a_ticked_row_leaves_the_total(
    browser, start_server, db
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 2, campaigns=3, seed=4)
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    def log_in() -> None:
        browser.get(base + "/panel/login?next=/panel/reports%3Fperiod%3Dlast_7_days")
        browser.find_element(By.ID, "name").send_keys("anna")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        browser.find_element(By.ID, "login").click()
        wait.until(seen.presence_of_element_located((By.ID, "column-chooser")))

    def chosen() -> list[str]:
        # One script: read while a new page loads, elements found one call earlier may be gone.
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#column-chooser li[data-column]'),"
            " item => item.dataset.column)"
        )

    log_in()
    # Add EPC, move it left of ROI, drop Unique: each button a new URL with the columns it makes.
    Select(browser.find_element(By.ID, "add-column")).select_by_value("cpc")
    browser.find_element(By.ID, "add-column-button").click()
    wait.until(lambda _: chosen()[-1:] == ["cpc"])
    browser.find_element(By.CSS_SELECTOR, 'button[value="up:cpc"]').click()
    wait.until(lambda _: chosen()[-2:] == ["cpc", "epc"])
    browser.find_element(By.CSS_SELECTOR, 'button[value="drop:unique_clicks"]').click()
    wait.until(lambda _: "unique_clicks" not in chosen())
    saved = chosen()
    assert saved == ["clicks", "conversions", "cr", "revenue", "cost", "profit", "roi", "cpc", "epc"]
    browser.find_element(By.ID, "set-name").send_keys("Browser day")
    browser.find_element(By.ID, "set-default").click()
    browser.find_element(By.ID, "save-set").click()
    # Saved as the default: the page's own columns now, so its URL names none.
    wait.until(lambda _: "set=" not in browser.current_url and "Browser day" in browser.page_source)
    assert "col=" not in browser.current_url and chosen() == saved

    # Out, and in again (a new session): the page opens with the set, named in the picker.
    browser.find_element(By.CSS_SELECTOR, "form.logout button").click()
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    log_in()
    assert "col=" not in browser.current_url and chosen() == saved
    picked = Select(browser.find_element(By.ID, "column-set")).first_selected_option.text
    assert picked == "Browser day — default"

    # Tick the first row: the page comes back with the total less that row's numbers.
    total = whole(browser.find_element(By.CSS_SELECTOR, "table.report tfoot tr.total td.n").text)
    first = browser.find_element(By.CSS_SELECTOR, "table.report tbody tr")
    clicks = whole(first.find_elements(By.CSS_SELECTOR, "td.n")[0].text)
    first.find_element(By.CSS_SELECTOR, "input.subtract-row").click()
    wait.until(seen.presence_of_element_located((By.ID, "total-less")))
    less = browser.find_element(By.CSS_SELECTOR, '#total-less td[data-column="clicks"]').text
    assert 0 < clicks < total and whole(less) == total - clicks
    assert browser.find_element(
        By.CSS_SELECTOR, "table.report tbody tr.ticked input.subtract-row"
    ).is_selected()
