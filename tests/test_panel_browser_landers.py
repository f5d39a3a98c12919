"""The landers pages in a real headless Chromium against a real `lanner serve`: a remote lander made in the
form, a local one from a zip chosen in the file input, both attached to a stream in the editor with
their shares as typed, and the local lander's preview opened on the panel's own origin, where its script
runs in an opaque origin (the sandbox) that cannot read the panel's cookies."""

from __future__ import annotations

from conftest import browser_required
from test_landers import make_zip

PASSWORD = "correct horse battery"
pytestmark = browser_required
SCRIPT = b"<!doctype html><title>loading</title><h1 id=h>Summer</h1><script src='app.js'></script>"
APP_JS = (
    b"try { document.cookie; document.title = 'cookies readable'; }"
    b" catch (e) { document.title = 'sandboxed ' + window.origin; }"
)


def test_landers_are_made_uploaded_and_weighted_in_a_stream_and_the_preview_is_sandboxed(
    browser, start_server, db, tmp_path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.landers import get_lander, stream_landers
    from models.admin.services import create_campaign

    create_campaign(db, "Push", "push", offer_url="https://o.example/?s={subid}")
    add_user(db, "anna", "admin", PASSWORD)
    archive = tmp_path / "summer.zip"
    archive.write_bytes(make_zip({"summer/index.html": SCRIPT, "summer/app.js": APP_JS}))
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/landers")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "lander-list")))
    assert "No landers yet." in browser.find_element(By.ID, "lander-list").text
    nav = browser.find_element(By.CSS_SELECTOR, ".top nav")
    assert nav.find_element(By.LINK_TEXT, "Landers").get_attribute("aria-current") == "page"
    tops = {round(link.rect["y"]) for link in nav.find_elements(By.TAG_NAME, "a")}
    assert len(tops) == 1, "the nav wraps at 1280 px"

    # A remote one.
    browser.find_element(By.CSS_SELECTOR, "details.new-lander summary").click()
    browser.find_element(By.ID, "lander-name").send_keys("Quiz")
    browser.find_element(By.ID, "lander-url").send_keys("https://lp.example/?s={subid}&go={offer}")
    browser.find_element(By.ID, "create-lander").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "p.saved")))
    assert browser.find_element(By.CSS_SELECTOR, "p.saved").text == "Lander created."
    assert (
        "https://lp.example/?s={subid}&go={offer}"
        in browser.find_element(By.CSS_SELECTOR, "code.lander-url").text
    )

    # A local one, its zip chosen in the file input.
    browser.get(base + "/panel/landers")
    browser.find_element(By.CSS_SELECTOR, "details.new-lander summary").click()
    browser.find_element(By.ID, "lander-name").send_keys("Summer")
    Select(browser.find_element(By.ID, "lander-kind")).select_by_value("local")
    browser.find_element(By.ID, "lander-zip").send_keys(str(archive))
    browser.find_element(By.ID, "create-lander").click()
    preview = wait.until(seen.presence_of_element_located((By.ID, "lander-preview")))
    summer = get_lander(db, "Summer")
    assert preview.get_attribute("href") == f"{base}/landers/{summer.folder}/"  # Where the panel is.

    # Both on the campaign's stream, weighted as offers are.
    browser.get(base + "/panel/campaigns/1/streams/1")
    table = wait.until(seen.presence_of_element_located((By.ID, "stream-landers")))
    table.find_element(By.NAME, f"lander_{summer.id}").send_keys("75")
    quiz = table.find_element(By.NAME, "lander_1")
    quiz.send_keys("25")
    shares = [cell.text for cell in table.find_elements(By.CSS_SELECTOR, "td.share")]
    assert shares == ["25.0%", "75.0%"]
    browser.find_element(By.ID, "save-stream").click()
    wait.until(seen.url_contains("saved=1"))
    assert sorted(stream_landers(1)) == [(1, 25), (summer.id, 75)]
    browser.get(base + f"/panel/landers/{summer.id}")
    uses = wait.until(seen.presence_of_element_located((By.ID, "lander-uses")))
    assert "push" in uses.text and "75" in uses.text

    # The preview, on the panel's own origin: its script runs, in an opaque origin.
    browser.get(browser.find_element(By.ID, "lander-preview").get_attribute("href"))
    wait.until(lambda driver: driver.title != "loading")
    assert browser.find_element(By.ID, "h").text == "Summer"
    assert browser.title == "sandboxed null"
