"""The report builder in a real headless Chromium against a real `lanner serve`: its bar chart drawn
from the page's JSON, a drill-down click into a row and the breadcrumb back, a day level drawn as a
time series."""

from __future__ import annotations

from conftest import browser_required

PASSWORD = "correct horse battery"
pytestmark = browser_required


def painted_pixels(browser, chart: str = "#report-chart") -> int:
    """How many pixels of the report chart's (or `chart`'s) canvas are not transparent."""
    return browser.execute_script(
        """
        const canvas = document.querySelector(arguments[0] + ' canvas');
        if (!canvas || !canvas.width || !canvas.height) return 0;
        const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) painted++;
        return painted;
        """,
        chart,
    )


def test_the_report_chart_is_drawn_and_a_row_drills_down(browser, start_server, db):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from models.accounts.users import add_user
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 300, 2, campaigns=2, seed=3)
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/reports?g1=campaign&g2=country")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#report-chart canvas")))
    wait.until(lambda _: painted_pixels(browser) > 100)
    assert "Clicks" in browser.find_element(By.CSS_SELECTOR, "#report-chart .u-legend").text
    # One bar per campaign: hovering over the left half's names the first row, the right half's the second.
    over = browser.find_element(By.CSS_SELECTOR, "#report-chart .u-over")
    first, second = (
        row.text for row in browser.find_elements(By.CSS_SELECTOR, "table.report tbody td.name a")
    )
    legend = (By.CSS_SELECTOR, "#report-chart .u-legend")
    for offset, label in ((-over.size["width"] // 4, first), (over.size["width"] // 4, second)):
        ActionChains(browser).move_to_element_with_offset(over, offset, 0).perform()
        wait.until(lambda _, label=label: label in browser.find_element(*legend).text)

    link = browser.find_element(By.CSS_SELECTOR, "table.report a.drill-down")
    name = link.text
    link.click()
    wait.until(lambda _: "d1=" in browser.current_url)
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "nav.drill [aria-current]")))
    assert browser.find_element(By.CSS_SELECTOR, "nav.drill [aria-current]").text == f"Campaign: {name}"
    assert browser.find_element(By.CSS_SELECTOR, "table.report thead th").text.startswith("Country")
    assert not browser.find_elements(By.CSS_SELECTOR, "table.report a.drill-down")  # The last level.
    wait.until(lambda _: painted_pixels(browser) > 100)

    browser.back()  # Every state is a URL: back is the level above.
    wait.until(lambda _: "d1=" not in browser.current_url)
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.report a.drill-down")))

    browser.get(base + "/panel/reports?g1=day")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#report-chart canvas")))
    wait.until(lambda _: painted_pixels(browser) > 100)

    # Two ticked countries: their series, one line each, of the metric chosen.
    browser.get(base + "/panel/reports?g1=country")
    ticks = wait.until(lambda _: browser.find_elements(By.CSS_SELECTOR, "input.chart-row")[:2])
    for tick in ticks:
        tick.click()
    browser.find_element(By.ID, "chart-rows").click()
    wait.until(lambda _: browser.current_url.count("row=") == 2)
    wait.until(lambda _: painted_pixels(browser, "#series-chart") > 100)
    legend = browser.find_element(By.CSS_SELECTOR, "#series-chart .u-legend").text
    assert all(row.text in legend for row in browser.find_elements(By.CSS_SELECTOR, "#series-totals td.name"))
    Select(browser.find_element(By.ID, "series-metric")).select_by_value("conversions")
    wait.until(
        lambda _: browser.find_element(By.ID, "series-chart").get_attribute("data-metric") == "conversions"
    )


def test_the_report_time_chart_s_axis_is_in_the_user_s_timezone(browser, start_server, db):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from workers.bench.generate import generate_clicks

    # The chart JSON's x are real instants now (time_buckets) and its `timezone` the user's: panel.js must
    # draw the axis in it. Half past in UTC: an axis drawn in UTC would start the hours at 18:30.
    generate_clicks(db, 100, 1, campaigns=1, seed=3)
    add_user(db, "ravi", "admin", PASSWORD, timezone="Asia/Kolkata")
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)

    browser.get(base + "/panel/reports?g1=hour&period=yesterday")
    wait.until(seen.presence_of_element_located((By.ID, "login")))
    browser.find_element(By.ID, "name").send_keys("ravi")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    over = wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#report-chart .u-over")))
    # The cursor on the chart's left edge: the legend names the first hour, the user's midnight.
    ActionChains(browser).move_to_element_with_offset(over, -over.size["width"] // 2 + 2, 0).perform()
    first = browser.find_element(By.CSS_SELECTOR, "#report-chart .u-legend .u-series:first-child .u-value")
    wait.until(lambda _: first.text not in ("", "--"))
    assert first.text.endswith("12:00am"), first.text
