"""The panel end to end in a real headless Chromium against a real `lanner serve` and `lanner worker`, as
the issue tells it: an admin logs in, creates a campaign with a filtered stream and two weighted offers,
visitors click, the clicks land and show in the dashboard and the report, a drill-down, a click's trace,
a conversion imported, log out; a buyer does not see the admin's campaign, a viewer cannot save it.
Everything the people do goes through the pages' forms; only the first admin and the visitors do not."""

from __future__ import annotations

import pytest
from conftest import browser_required, click
from test_panel_browser import painted_pixels

PASSWORD = "correct horse battery"
pytestmark = [pytest.mark.long, browser_required]

# A POST the page's own forms never send, with the page's CSRF token: what a viewer's forged save would be.
FORGED_SAVE = """
const done = arguments[arguments.length - 1];
const body = new URLSearchParams({
    csrf_token: document.querySelector('input[name=csrf_token]').value,
    name: 'Taken over', alias: 'spring', status: 'active', rotation: 'position', timezone: 'UTC',
    default_action: 'not_found', cost_model: 'cpc',
});
fetch(arguments[0], {method: 'POST', body, redirect: 'manual'})
    .then(response => done(response.status), error => done(String(error)));
"""


def test_the_issue_s_flow_from_login_to_a_viewer_who_cannot_save(browser, start_server, start_consumer, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import get_campaign

    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    start_consumer()
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    find, find_all = browser.find_element, browser.find_elements

    def log_in(name: str) -> None:
        browser.get(base + "/panel/login")
        wait.until(seen.presence_of_element_located((By.ID, "login")))
        find(By.ID, "name").send_keys(name)
        find(By.ID, "password").send_keys(PASSWORD)
        find(By.ID, "login").click()
        wait.until(seen.presence_of_element_located((By.ID, "logout")))

    def log_out() -> None:
        if not find_all(By.ID, "logout"):  # An error page has no menu.
            open_page("/panel", (By.ID, "logout"))
        find(By.ID, "logout").click()
        wait.until(seen.presence_of_element_located((By.ID, "login")))

    def open_page(path: str, locator: tuple[str, str]):
        browser.get(base + path)
        return wait.until(seen.presence_of_element_located(locator))

    def fill(form, **fields: str) -> None:
        for name, value in fields.items():
            field = form.find_element(By.NAME, name)
            if field.tag_name == "select":
                Select(field).select_by_value(value)
            else:
                field.clear()
                field.send_keys(value)

    def cells(row) -> list[str]:
        return [cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td")]

    # -- the admin sets up a campaign: a second offer, the campaign, its stream's filter and weights.
    log_in("anna")
    open_page("/panel/offers", (By.CSS_SELECTOR, "details.new-offer summary")).click()
    form = find(By.CSS_SELECTOR, "form.offer-form")
    fill(form, name="Offer B", url="https://b.example/?click={subid}", payout="2")
    find(By.ID, "create-offer").click()
    assert wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "p.saved"))).text == "Created."
    assert find(By.TAG_NAME, "h1").text.endswith(": Offer B")

    form = open_page("/panel/campaigns/new", (By.ID, "campaign-form"))
    fill(form, name="Spring sale", alias="spring", offer="new", offer_url="https://a.example/?click={subid}")
    find(By.ID, "create-campaign").click()
    wait.until(seen.presence_of_element_located((By.ID, "campaign-url")))
    campaign_path = browser.current_url.removeprefix(base)
    assert find(By.ID, "campaign-url").get_attribute("value").endswith("/spring")
    find(By.CSS_SELECTOR, "ol.streams li[data-stream] a[href*='/streams/']").click()

    form = wait.until(seen.presence_of_element_located((By.ID, "stream-form")))
    row = form.find_element(By.CSS_SELECTOR, "#filter-rows [data-filter-row]")
    # A sub id filter: sub ids are stored with the click, so its trace re-evaluates the filter as it was.
    Select(row.find_element(By.CSS_SELECTOR, ".filter-type")).select_by_value("sub_id")
    row.find_element(By.CSS_SELECTOR, ".filter-key").send_keys("1")
    row.find_element(By.CSS_SELECTOR, ".filter-value").send_keys("fb")
    weights = {}  # Offer name -> its weight field.
    for offer in form.find_elements(By.CSS_SELECTOR, "#stream-offers tbody tr"):
        name = offer.find_element(By.TAG_NAME, "td").text.split(" #")[0]
        weights[name] = offer.find_element(By.TAG_NAME, "input")
    assert set(weights) >= {"Offer B"} and len(weights) == 2
    for name, weight in weights.items():
        weight.clear()
        weight.send_keys("30" if name == "Offer B" else "70")
    stream_url = browser.current_url
    find(By.ID, "save-stream").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "p.notice")))
    browser.get(stream_url)  # What was stored, drawn again from the database.
    shares = wait.until(lambda _: [cell.text for cell in find_all(By.CSS_SELECTOR, "#stream-offers .share")])
    assert sorted(shares) == ["30.0%", "70.0%"]
    assert find(By.CSS_SELECTOR, "#filter-rows .filter-value").get_attribute("value") == "fb"

    # -- visitors: sub1=fb passes the filter and gets one of the offers, anything else gets a 404.
    offers_seen, passed_subids = set(), []
    # Random 70/30: at least 10 clicks, and on until both offers were picked (80 all picking one: ~1e-12).
    for n in range(80):
        status, headers, _ = click(server.port, "spring", f"sub1=fb&n={n}", ip=f"198.51.100.{n + 1}")
        assert status == 302, (status, headers)
        offers_seen.add(headers["location"].split("/?")[0])
        passed_subids.append(headers["location"].split("click=")[1])
        if len(offers_seen) == 2 and n >= 9:
            break
    assert offers_seen == {"https://a.example", "https://b.example"}
    for n in range(4):
        assert click(server.port, "spring", "sub1=tw", ip=f"203.0.113.{n + 1}")[0] == 404
    total = len(passed_subids) + 4

    # -- the dashboard once the consumer has landed them: the tile counts them, the chart draws them.
    def dashboard_clicks(_) -> bool:
        browser.get(base + "/panel?period=today")
        tile = find(By.CSS_SELECTOR, ".tiles .tile strong")
        return tile.text == f"{total:,}"

    WebDriverWait(browser, 60, poll_frequency=0.5).until(dashboard_clicks)
    wait.until(lambda _: painted_pixels(browser) > 100)
    top = find(By.CSS_SELECTOR, "table.campaigns tbody tr")
    assert cells(top)[0].startswith("Spring sale") and cells(top)[1] == str(total)

    # -- the report: the campaign at level 1, drilled into by offer at level 2.
    open_page("/panel/reports?period=today&g1=campaign&g2=offer", (By.CSS_SELECTOR, "table.report"))
    find(By.LINK_TEXT, "Spring sale").click()
    crumbs = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "nav.drill a")))
    assert "by offer" in find(By.CSS_SELECTOR, "nav.drill .by").text
    assert "Spring sale" in find(By.CSS_SELECTOR, "nav.drill [aria-current=page]").text
    level_2 = {cells(row)[0]: cells(row)[1] for row in find_all(By.CSS_SELECTOR, "table.report tbody tr")}
    assert {name for name in level_2 if name.startswith("Offer B")} and len(level_2) >= 2, level_2
    assert sum(int(clicks) for clicks in level_2.values()) == total
    crumbs.click()  # Back up to level 1.
    wait.until(seen.presence_of_element_located((By.LINK_TEXT, "Spring sale")))

    # -- a click's page, found through the click log's subid filter: its trace names stream and filter.
    subid = passed_subids[0]
    form = open_page("/panel/clicks", (By.CSS_SELECTOR, "form input[name=subid]")).find_element(
        By.XPATH, ".."
    )
    form.find_element(By.NAME, "subid").send_keys(subid)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda _: len(find_all(By.CSS_SELECTOR, "table.clicks-log tbody tr a")) == 1)
    find(By.LINK_TEXT, subid).click()
    trace = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".click-trace-stream")))
    heading = trace.find_element(By.TAG_NAME, "h3").text  # The campaign's alias, the stream, its verdict.
    assert heading.startswith("spring · stream") and "“Default”" in heading and heading.endswith("matched")
    verdict = trace.find_element(By.CSS_SELECTOR, "table.click-trace tr")
    assert (
        verdict.get_attribute("class") == "pass" and "sub_id_1" in verdict.text and "saw fb" in verdict.text
    )

    # -- a conversion imported for that click: its row's verdict, the conversion log, the report.
    form = open_page("/panel/conversions/import", (By.NAME, "csv")).find_element(By.XPATH, "./ancestor::form")
    form.find_element(By.NAME, "csv").send_keys(f"subid,status,payout\n{subid},sale,5\n")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.import-results tbody tr")))
    assert result.get_attribute("class") == "imported" and cells(result)[1:3] == [subid, "created"]
    find(By.LINK_TEXT, "Conversions").click()
    wait.until(seen.presence_of_element_located((By.PARTIAL_LINK_TEXT, "Import from CSV")))
    assert subid in find(By.CSS_SELECTOR, "main table").text
    open_page("/panel/reports?period=today&g1=campaign", (By.CSS_SELECTOR, "table.report"))
    heads = [cell.text.rstrip(" ▲▼") for cell in find_all(By.CSS_SELECTOR, "table.report thead th")]
    (spring,) = [cells(row) for row in find_all(By.CSS_SELECTOR, "table.report tbody tr")]
    assert (
        spring[0].startswith("Spring sale")
        and spring[heads.index("Conv.")] == "1"
        and spring[heads.index("Clicks")] == str(total)
    )

    # -- people: a buyer and a viewer added through the users page, the campaign shared with the viewer.
    for name, role in (("bob", "buyer"), ("vera", "viewer")):
        form = open_page("/panel/users", (By.CSS_SELECTOR, "form[action='/panel/users']"))
        fill(form, name=name, role=role, password=PASSWORD)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        # The next page first: a lookup while it loads is "aborted by navigation", not "not found yet".
        wait.until(seen.staleness_of(form))
        wait.until(seen.presence_of_element_located((By.LINK_TEXT, name)))
    find(By.LINK_TEXT, "vera").click()
    form = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "form[action$='/share']")))
    Select(form.find_element(By.NAME, "campaign")).select_by_visible_text("Spring sale (spring)")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "form[action*='/shares/'] button")))
    log_out()
    browser.get(base + "/panel")
    wait.until(seen.presence_of_element_located((By.ID, "login")))  # The session ended with the log-out.

    # -- the buyer creates a campaign of their own and sees it, but not the admin's, whose editor is a 404.
    log_in("bob")
    form = open_page("/panel/campaigns/new", (By.ID, "campaign-form"))
    fill(form, name="Bob's own", alias="bobs-own", offer="new", offer_url="https://c.example/?click={subid}")
    find(By.ID, "create-campaign").click()
    wait.until(seen.presence_of_element_located((By.ID, "campaign-url")))
    listed = open_page("/panel/campaigns?period=today", (By.ID, "campaign-list")).text
    assert "Bob's own" in listed and "Spring sale" not in listed
    heading = open_page(campaign_path, (By.TAG_NAME, "h1"))
    assert heading.text == "Not found" and not find_all(By.ID, "campaign-form")
    log_out()

    # -- the viewer sees the shared campaign read-only, and a forged save is refused.
    log_in("vera")
    listed = open_page("/panel/campaigns?period=today", (By.ID, "campaign-list")).text
    assert "Spring sale" in listed and "Bob's own" not in listed
    open_page(campaign_path, (By.ID, "campaign-form"))
    assert find(By.CSS_SELECTOR, "#campaign-form fieldset").get_attribute("disabled") is not None
    assert not find_all(By.ID, "save-campaign") and not find_all(By.ID, "add-stream")
    assert browser.execute_async_script(FORGED_SAVE, base + campaign_path) == 403
    assert get_campaign(db, int(campaign_path.rsplit("/", 1)[1])).name == "Spring sale"
    log_out()
