"""A list sorted by two keys and the campaign editor's numbers in a real headless Chromium against a real
`lanner serve` (one server and one browser session for the module): header clicks on the offers list,
the search box narrowing it by htmx with the sort kept, its CSV link saying what is shown; then the
editor's per-stream and per-offer numbers against SQL over the stored clicks and cap counters."""

from __future__ import annotations

import time

from conftest import browser_required

PASSWORD = "correct horse battery"
DAY_MS = 86_400_000
pytestmark = browser_required


def column(browser, table: str, index: int) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, f"{table} tbody tr")
    return [row.find_elements(By.CSS_SELECTOR, "td")[index].text for row in rows]


def test_two_key_sorting_and_the_editor_s_numbers_in_a_browser(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from models.accounts.users import add_user
    from models.admin.services import create_offer, update_offer
    from models.store.rows import fetch_single
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 400, 2, campaigns=3, seed=11) == 400
    create_offer(db, "Beta idle", "https://beta.example/")
    create_offer(db, "alpha idle", "https://alpha.example/")
    update_offer(db, 1, daily_cap=100_000)
    add_user(db, "anna", "admin", PASSWORD)
    server = start_server(workers=1, admin=True)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    wait = WebDriverWait(browser, 60)
    browser.get(base + "/panel/login?next=/panel/offers%3Fperiod%3Dlast_7_days")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    wait.until(seen.presence_of_element_located((By.ID, "offer-list")))

    def count(sql: str, params: tuple = ()) -> int:
        return fetch_single(db.connection(), sql, params)[0]

    # Clicks: most first. Then Offer: by name first, clicks second (the idle two tie on clicks).
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="clicks"]').click()
    wait.until(lambda b: "sort=-clicks" in b.current_url)
    clicks = [int(text.replace(",", "")) for text in column(browser, "table.offers", 6)]
    assert clicks == sorted(clicks, reverse=True) and sum(clicks) == 400 and clicks[-2:] == [0, 0]
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="name"]').click()
    wait.until(lambda b: "sort=name,-clicks" in b.current_url)
    names = [text.splitlines()[0] for text in column(browser, "table.offers", 0)]
    assert names == sorted(names, key=str.lower) and names[0] == "alpha idle"
    marks = browser.find_elements(By.CSS_SELECTOR, "th .sort-mark")
    assert [mark.text for mark in marks] == ["▲1", "▼2"]
    # The search narrows the list in place (htmx) and keeps the sort; the CSV link says the same.
    browser.find_element(By.ID, "q").send_keys("idle")
    wait.until(
        lambda b: (
            "q=idle" in b.current_url and len(b.find_elements(By.CSS_SELECTOR, "table.offers tbody tr")) == 2
        )
    )
    assert [text.splitlines()[0] for text in column(browser, "table.offers", 0)] == [
        "alpha idle",
        "Beta idle",
    ]
    href = browser.find_element(By.ID, "offers-csv").get_attribute("href")
    assert "q=idle" in href and ("sort=name%2C-clicks" in href or "sort=name,-clicks" in href)

    # The editor of campaign 1 (gen-0, its one stream to offer 1): its numbers as the rows count them.
    browser.get(base + "/panel/campaigns/1?period=last_7_days")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.stream-numbers")))
    today = int(time.time() * 1000) // DAY_MS * DAY_MS
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "tr.stream-total td")]
    # weight, served | clicks, conv., revenue today | clicks, conv., revenue 7 days | cap today, total
    assert int(cells[2].replace(",", "")) == count(
        "SELECT COUNT(*) FROM click WHERE campaign_id = 1 AND created_at >= ?", (today,)
    )
    assert int(cells[5].replace(",", "")) == count("SELECT COUNT(*) FROM click WHERE campaign_id = 1")
    offer = [td.text for td in browser.find_elements(By.CSS_SELECTOR, 'tr.offer-numbers[data-offer="1"] td')]
    assert offer[0] == "100 · 100.0%" and offer[1] == "100.0%"
    counted_today = count(
        "SELECT COALESCE(SUM(clicks), 0) FROM click_counter WHERE scope = 'offer' AND ref_id = 1 AND day = ?",
        (int(time.strftime("%Y%m%d", time.gmtime(today / 1000))),),
    )
    assert offer[8] == f"{counted_today:,} / 100,000" and offer[9] == "–"
    assert counted_today == count(
        "SELECT COUNT(*) FROM click WHERE offer_id = 1 AND created_at >= ?", (today,)
    )
    # Today alone: the period's columns go.
    browser.find_element(By.CSS_SELECTOR, "nav.periods a[href^='?period=today']").click()
    wait.until(lambda b: "period=today" in b.current_url)
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "table.stream-numbers thead th")]
    assert "Clicks today" in headers and not [h for h in headers if "7 days" in h]

    # The click log: Country, then Browser: by browser, equal ones by country, the newest first among
    # equals (the marks say which key is which); its CSV link carries the sort with the filters.
    browser.get(base + "/panel/clicks?limit=500")
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "table.clicks-log")))
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="country"]').click()
    wait.until(lambda b: "sort=country" in b.current_url)
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="browser"]').click()
    wait.until(lambda b: "sort=browser%2Ccountry" in b.current_url or "sort=browser,country" in b.current_url)
    marks = browser.find_elements(By.CSS_SELECTOR, "th .sort-mark")  # Country's header comes first.
    assert [mark.text for mark in marks] == ["▲2", "▲1"]
    shown = browser.execute_script(
        """const heads = [...document.querySelectorAll('table.clicks-log thead th')]
               .map(th => th.dataset.column || '');
           return [...document.querySelectorAll('table.clicks-log tbody tr:not(.log-path-row)')].map(
               tr => [...tr.children].filter((_, i) => heads[i] === 'browser' || heads[i] === 'country')
                                     .map(td => td.textContent.trim()));"""
    )
    stored = db.connection().execute("SELECT country, browser FROM click ORDER BY browser, country, id DESC")
    assert shown == [[country or "–", name or "–"] for country, name in stored.fetchall()]
    href = browser.find_element(By.ID, "clicks-csv").get_attribute("href")
    assert "sort=browser%2Ccountry" in href or "sort=browser,country" in href
    # The first click's trace: its page says the decision path its row in the log says.
    path = browser.find_element(By.CSS_SELECTOR, "table.clicks-log tr.log-path-row td").text
    browser.find_element(By.CSS_SELECTOR, "table.clicks-log tbody td a[href^='/panel/clicks/']").click()
    wait.until(seen.presence_of_element_located((By.ID, "click-path")))
    assert browser.find_element(By.ID, "click-path").text == path and path
