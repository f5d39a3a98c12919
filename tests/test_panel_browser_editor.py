"""The campaign editor in a real headless Chromium against a real `lanner serve` admin socket: a stream
dragged above another is stored in its new place, and a filter row added from the builder's template is
saved with the stream."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required

# chromedriver's pointer actions never start an HTML5 drag (they move the mouse, Chromium starts no drag
# session for them), so the drag is the events a browser fires for one, dispatched on the page: panel.js's
# own handlers do the rest.
DRAG = """
const [source, target] = arguments;
const data = new DataTransfer();
const fire = (element, type) => element.dispatchEvent(
    new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: data}));
fire(source, 'dragstart');
fire(target, 'dragenter');
fire(target, 'dragover');
fire(target, 'drop');
fire(source, 'dragend');
"""


def test_drag_a_stream_above_another_and_add_a_filter_row_from_the_template(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import add_stream, create_campaign, describe_filters, list_streams

    create_campaign(db, "Spring", "spring", offer_url="https://a.example/?s={subid}")
    second = add_stream(db, 1, name="second", offers=[(1, 1)])
    third = add_stream(db, 1, name="third", offers=[(1, 1)])
    first = list_streams(db, 1)[0]
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/campaigns/1")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "ol.streams li[data-stream]")))

    def shown_order():
        items = browser.find_elements(By.CSS_SELECTOR, "ol.streams li[data-stream]")
        return [int(item.get_attribute("data-stream")) for item in items]

    assert shown_order() == [first.id, second.id, third.id]
    source = browser.find_element(By.CSS_SELECTOR, f'li[data-stream="{third.id}"]')
    target = browser.find_element(By.CSS_SELECTOR, f'li[data-stream="{first.id}"]')
    browser.execute_script(DRAG, source, target)
    wait.until(seen.staleness_of(source))  # The order was posted and the editor loaded again.
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "ol.streams li[data-stream]")))
    assert [s.id for s in list_streams(db, 1)] == [third.id, first.id, second.id]
    assert shown_order() == [third.id, first.id, second.id]

    browser.find_element(By.ID, "add-stream").click()
    wait.until(seen.presence_of_element_located((By.ID, "add-filter")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#filter-rows [data-filter-row]")
    browser.find_element(By.ID, "add-filter").click()
    added = browser.find_elements(By.CSS_SELECTOR, "#filter-rows [data-filter-row]")
    assert len(added) == len(rows) + 1
    row = added[-1]
    Select(row.find_element(By.CSS_SELECTOR, ".filter-type")).select_by_value("device")
    value = row.find_element(By.CSS_SELECTOR, ".filter-value")
    assert (
        value.get_attribute("placeholder") == "mobile,tablet"
        and value.get_attribute("list") == "filter-values-device"
    )
    Select(row.find_element(By.CSS_SELECTOR, ".filter-op")).select_by_value("!=")
    value.send_keys("desktop,tv")
    weight = browser.find_element(By.NAME, "offer_1")
    weight.send_keys("40")
    assert browser.find_element(By.CSS_SELECTOR, "#stream-offers .share").text == "100.0%"
    browser.find_element(By.ID, "save-stream").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "p.notice")))
    newest = max(list_streams(db, 1), key=lambda s: s.id)
    assert describe_filters(newest) == ["device!=desktop,tv"] and newest.id not in (
        first.id,
        second.id,
        third.id,
    )
