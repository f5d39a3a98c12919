"""Save screenshots of every web panel page to docs/panel/ (the README's gallery shows them).

Seeds a throwaway install (a temporary data directory: 5 campaigns, one with filtered streams and two
weighted offers, a week of generated clicks with conversions and costs, a postback target, a status
map, two affiliate networks, two traffic sources (one a campaign's), two landers on a stream, users with a
share and an API key), runs `lanner serve` on ports the kernel picks, sends it real clicks (so clicks
have routing traces) and lands them with `lanner spool flush`, imports conversions through the panel's
form, and drives Debian's chromium headless through Selenium (`apt-get install
chromium chromium-driver`; selenium is in the test extra): 1280 wide, plus 390 wide for the dashboard
and the campaign list. Rerunnable; run from the repository root, with Lanner importable:

    python scripts/panel_screenshots.py [docs/panel]
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs/panel"
PASSWORD = "screenshot password"
NAMES = ("Spring sale – FB", "Search brand US", "Push DE mobile", "Native retargeting", "TikTok test")
DESKTOP, PHONE = (1280, 900), (390, 844)
# A long page is cut here (the window's height, its frame included): the images stay small.
MAX_HEIGHT = {DESKTOP[0]: 1200, PHONE[0]: 2000}
# The page's full height: the document's, or its last element's bottom where a box scrolls inside it.
PAGE_HEIGHT = """
const last = document.querySelector('main') || document.body;
return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight,
                last.getBoundingClientRect().bottom + window.scrollY)
       + window.outerHeight - window.innerHeight;
"""
MOBILE_UA = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Mobile/15E148 Safari/604.1"
)
DESKTOP_UA = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Safari/537.36"
)


def seed(data_dir: Path) -> dict:
    """The install the pages show; returns the ids the page URLs need."""
    from models.accounts.apikeys import create_api_key
    from models.accounts.sharing import share_campaign
    from models.accounts.users import add_user
    from models.admin.services import (
        add_stream,
        create_offer,
        get_campaign,
        list_streams,
        reorder_streams,
        update_campaign,
        update_offer,
        update_stream,
    )
    from models.admin.sources import create_source
    from models.admin.tags import set_campaign_tags
    from models.conversions.admin import add_target, map_status
    from models.conversions.networks import create_network
    from models.migrations.runner import migrate
    from models.store.database import open_database
    from settings import load_settings
    from workers.bench.generate import generate_clicks

    settings = load_settings({"LANNER_DATA_DIR": str(data_dir)})
    db = open_database(settings.database_location, autocheckpoint=True)
    migrate(db)
    generate_clicks(db, 6000, 7, campaigns=len(NAMES), seed=16)
    for campaign_id, name in enumerate(NAMES, start=1):
        update_campaign(db, campaign_id, name=name, cost_value=0.02 * campaign_id)
        update_offer(db, campaign_id, name=f"{name.split(' – ')[0]} landing A", payout=2.0 + campaign_id)
    update_campaign(db, 5, status="paused")
    for campaign_id, tags in ((1, ["push", "tier 1"]), (2, ["pop"]), (3, ["push"])):
        set_campaign_tags(db, get_campaign(db, campaign_id), tags)
    everyone = list_streams(db, 1)[0]
    update_stream(db, everyone.id, name="Everyone else")
    second = create_offer(db, "Spring sale – landing B", "https://lp-b.example/?click={subid}", payout=4.5)
    add_stream(db, 1, name="Bots and crawlers", type="intercepting", action="not_found", filters=["bot=yes"])
    filtered = add_stream(
        db,
        1,
        name="FB mobile",
        offers=[(1, 70), (second.id, 30)],
        filters=["sub_id_1=fb", "device=mobile,tablet", "language!=zh"],
        daily_cap=5000,
    )
    bots = [s.id for s in list_streams(db, 1) if s.type == "intercepting"]
    reorder_streams(db, 1, [*bots, filtered.id, everyone.id])
    update_campaign(db, 1, default_action="redirect", default_payload="https://fallback.example/?s={subid}")
    add_target(db, "gen-0", "https://tracker.example/cb?click={sub_id_2}&sum={payout}&st={status}", ["sale"])
    map_status(db, "approved_lead", "lead")
    map_status(db, "chargeback", "rejected", network="adnet")
    adnet = create_network(db, "AdNet", alias="adnet", from_template="affise", notes="manager: Olga")
    create_network(
        db,
        "Sweeps Co",
        subid_macro="{clickid}",
        payout_macro="{sum}",
        status_macro="{status}",
        tid_macro="{transaction_id}",
        offer_params="clickid={subid}",
    )
    update_offer(db, 1, network_id=adnet.id)
    create_source(db, "Zeropark pop", from_catalogue="zeropark")
    push = create_source(db, "RichAds push", from_catalogue="richads")
    update_campaign(db, 3, source=str(push.id))
    update_offer(db, second.id, network_id=adnet.id)
    lander = seed_landers(db, settings, filtered.id)
    add_user(db, "anna", "admin", PASSWORD, timezone="Europe/Berlin")
    add_user(db, "ben", "buyer", PASSWORD)
    add_user(db, "vic", "viewer", PASSWORD, hides_money=True)
    share_campaign(db, 1, "ben", may_edit=True)
    share_campaign(db, 2, "vic")
    create_api_key(db, "ben", "read", label="Looker dashboard")
    convert_generated_clicks(db, settings)
    spend_the_week(db)
    seed_rates(db)
    automation = seed_automation(db, push.name)
    db.close()
    return {
        "stream": filtered.id,
        "offer": second.id,
        "user": 2,
        "network": adnet.id,
        "source": push.id,
        "lander": lander,
        **automation,
    }


def seed_automation(db, source: str) -> dict:
    """A rule over the first campaign's offers, a conversion API connection for it and a spend connection
    for a traffic source (made, never synced: the pages show them as set up) mapping a campaign whose
    zones are labelled; their ids, and the zones."""
    from peewee import fn

    from models.conversions.platforms.connections import create_connection
    from models.optimisation.labels import scope_of, set_labels
    from models.optimisation.rules import create_rule
    from models.reporting.spend.connections import create_spend_connection, map_ids
    from models.tables.click import Click

    rule = create_rule(
        db,
        "Pause offers without sales",
        campaigns=["gen-0"],
        dimension="offer",
        window="3d",
        conditions=["clicks >= 300 and conversions = 0"],
        action="pause",
        max_actions=2,
    )
    platform = create_connection(
        db,
        "Spring sale pixel",
        "meta",
        campaign="gen-0",
        credentials={"pixel_id": "1234567890", "access_token": "EAAB-screenshot-token-0123456789"},
    )
    spend = create_spend_connection(
        db,
        "RichAds spend",
        "propellerads",
        source=source,
        credentials={"api_token": "screenshot-api-token-0123456789"},
        parameter="sub_id_1",
    )
    # Campaign 3 (gen-2, the RichAds one) is platform campaign 7001 there, and a buyer labelled the
    # week's busiest of its zones (sub_id_1): its report by zone shows the labels and the push button.
    map_ids(db, spend.id, {"7001": "gen-2"})
    zone, clicks = Click._meta.fields["sub_id_1"], fn.COUNT(Click.id)
    busiest = Click.select(zone).where(Click.campaign_id == 3).group_by(zone).order_by(clicks.desc(), zone)
    zones = [row.sub_id_1 for row in busiest.limit(8)]
    scope = scope_of(db, "gen-2", None, "sub_id_1")
    set_labels(db, scope, zones[:3], "blacklist")
    set_labels(db, scope, zones[3:4], "whitelist")
    return {"rule": rule.id, "platform": platform.id, "spend": spend.id, "zones": ",".join(zones)}


def seed_landers(db, settings, stream_id: int) -> int:
    """A remote lander and a local one (from a zip), both on the stream; returns the local one's id."""
    import io
    import zipfile

    from models.admin.landers import LanderFiles, create_lander
    from models.admin.services import update_stream

    page = (
        "<!doctype html><meta charset=utf-8><title>Spring quiz</title><h1>Which spring style are you?</h1>"
        "<p>Three questions, then your offer.</p><a href='/lp/click'>Start</a>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("spring-quiz/index.html", page)
        archive.writestr("spring-quiz/style.css", "body { font-family: sans-serif; }")
    remote = create_lander(
        db,
        "Spring advertorial",
        url="https://lp.example/spring/?s={subid}&go={offer}",
        notes="hosted on the buyer's own domain",
    )
    files = LanderFiles.from_settings(settings)
    local = create_lander(db, "Spring quiz", zip_data=buffer.getvalue(), files=files)
    update_stream(db, stream_id, landers=[(remote.id, 60), (local.id, 40)])
    return local.id


def convert_generated_clicks(db, settings) -> None:
    """A few conversions a day per campaign over the week, so the numbers have revenue and a CR."""
    from datetime import date, timedelta

    from models.conversions.manual import import_conversions
    from models.conversions.postbacks import ConversionRecorder
    from models.reporting.clicklog import ClickFilter, list_clicks

    lines = ["subid,status,payout"]
    for campaign_id in range(1, len(NAMES) + 1):
        for back in range(7):
            day = date.today() - timedelta(days=back)
            query = ClickFilter(
                campaign_id=campaign_id, since=day.isoformat(), until=day.isoformat(), limit=40
            )
            for n, click in enumerate(list_clicks(db, query)[: 2 + (campaign_id * 3 + back) % 5]):
                lines.append(f"{click['subid']},{'lead' if n % 4 == 3 else 'sale'},{2 + campaign_id + n % 3}")
    recorder = ConversionRecorder(db, park_ms=settings.postback_park_ms)
    import_conversions(recorder, "\n".join(lines) + "\n")


def seed_rates(db) -> None:
    """A week of the ECB's rates as the worker stores them, and one GBP rate set by hand."""
    from datetime import date, timedelta

    from models.reporting.currency import set_rates, store_fetched

    today = date.today()
    days = {
        today - timedelta(days=n): {"EUR": 1.05 + n / 500, "GBP": 1.26 - n / 400, "CHF": 1.12 + n / 800}
        for n in range(6, -1, -1)
        if (today - timedelta(days=n)).weekday() < 5  # The ECB publishes on working days.
    }
    store_fetched(db, days, "www.ecb.europa.eu")
    set_rates(db, {"GBP": 1.255}, source="panel", day=today)


def spend_the_week(db) -> None:
    """What each campaign cost over the week (`lanner cost set`): some make money, one loses it."""
    from datetime import date, timedelta

    from models.admin.services import get_campaign
    from models.reporting.costs import set_campaign_cost

    since, until = (date.today() - timedelta(days=7)).isoformat(), date.today().isoformat()
    for campaign_id, amount in zip(range(1, len(NAMES) + 1), (150, 90, 110, 205, 60), strict=True):
        currency = get_campaign(db, campaign_id).cost_currency
        set_campaign_cost(db, campaign_id, since, until, amount, cost_currency=currency)


def serve(data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int, int]:
    """`lanner serve` on ports the kernel picks: (process, web port, admin port)."""
    log = open(data_dir / "serve.log", "w+")
    args = [sys.executable, "-m", "cli", "serve", "--workers", "1", "--bind", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*args, "--admin-bind", "127.0.0.1:0"], env=env, cwd=ROOT, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = (data_dir / "serve.log").read_text()
        web = re.search(r"web: listening on 127\.0\.0\.1:(\d+) ", text)
        admin = re.search(r"admin: listening on 127\.0\.0\.1:(\d+) ", text)
        if web and admin:
            return process, int(web.group(1)), int(admin.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit("lanner serve did not start:\n" + (data_dir / "serve.log").read_text())


def send_clicks(port: int) -> list[str]:
    """Visitors of the first campaign through the web port (as nginx would pass them); their subids."""
    subids = []
    for n in range(60):
        source = ("fb", "fb", "google", "")[n % 4]
        query = f"sub1={source}&sub2=zone{n % 7}" if source else f"sub2=zone{n % 7}"
        headers = {"X-Real-IP": f"198.51.100.{n + 1}", "User-Agent": MOBILE_UA if n % 3 else DESKTOP_UA}
        if n % 10 == 9:
            headers["User-Agent"] = "Googlebot/2.1 (+http://www.google.com/bot.html)"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", f"/gen-0?{query}", headers=headers)
            response = connection.getresponse()
            response.read()
            location = response.getheader("Location") or ""
        finally:
            connection.close()
        found = parse_qs(urlsplit(location).query).get("click") or parse_qs(urlsplit(location).query).get("s")
        if found:
            subids.append(found[0])
    return subids


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def pages(ids: dict, subid: str) -> list[tuple[str, str]]:
    """(file name, path) of each desktop page, after the login and the conversion import."""
    stream, offer, user = ids["stream"], ids["offer"], ids["user"]
    simulate = (
        "ip=198.51.100.9&ua=Mozilla%2F5.0+%28iPhone%3B+CPU+iPhone+OS+17_4%29&params=sub_id_1%3Dfb&run=1"
    )
    week = "period=last_7_days"
    return [
        ("dashboard", f"/panel?{week}"),
        ("campaigns", f"/panel/campaigns?{week}"),
        ("campaign-new", "/panel/campaigns/new"),
        ("campaign", f"/panel/campaigns/1?{week}"),
        ("stream", f"/panel/campaigns/1/streams/{stream}"),
        ("simulate", f"/panel/campaigns/1/simulate?{simulate}"),
        ("costs", "/panel/campaigns/1/costs"),
        ("offers", f"/panel/offers?{week}&sort=-clicks,name"),
        ("offer", f"/panel/offers/{offer}"),
        ("rates", "/panel/rates"),
        ("landers", "/panel/landers"),
        ("lander", f"/panel/landers/{ids['lander']}"),
        ("sources", f"/panel/sources?{week}&sort=-clicks"),
        ("source", f"/panel/sources/{ids['source']}"),
        ("networks", f"/panel/networks?{week}"),
        ("network", f"/panel/networks/{ids['network']}"),
        ("postbacks", "/panel/postbacks"),
        ("reports", f"/panel/reports?{week}&g1=campaign&g2=offer"),
        ("reports-drilled", f"/panel/reports?{week}&g1=campaign&g2=offer&d1=1"),
        ("reports-by-day", f"/panel/reports?{week}&g1=day"),
        (
            "campaigns-column-sets",  # A chosen set, sorted by two keys, the total without a ticked row.
            f"/panel/campaigns?{week}&col=status,clicks,conversions,cr,revenue,cost,profit,roi,epc"
            "&sort=-profit,-clicks&without=1",
        ),
        ("clicks", "/panel/clicks"),
        # Sorted by two keys: country (Z to A), then the newest first within one (the headers: ▼1 ▼2).
        ("clicks-sorted", f"/panel/clicks?{week}&sort=-country,-time"),
        ("click", f"/panel/clicks/{subid}"),
        ("conversions", "/panel/conversions"),
        ("conversions-sorted", f"/panel/conversions?{week}&sort=status,-payout"),
        ("postback-log", "/panel/postback-log"),
        ("rules", "/panel/rules"),
        ("rule", f"/panel/rules/{ids['rule']}"),
        ("alerts", "/panel/alerts"),
        ("platforms", "/panel/platforms"),
        ("platform", f"/panel/platforms/{ids['platform']}"),
        ("spend", f"/panel/platforms/spend/{ids['spend']}"),
        ("users", "/panel/users"),
        ("user", f"/panel/users/{user}"),
        ("audit", "/panel/audit"),
        ("status", "/panel/status"),
        ("account", "/panel/account"),
    ]


def save(driver, path: Path, width: int, height: int) -> Path:
    """The whole page (up to its MAX_HEIGHT) once its charts are drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
    charts = driver.find_elements(By.CSS_SELECTOR, ".chart")
    if charts:  # panel.js draws them after DOMContentLoaded.
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".chart canvas"))
    needed = driver.execute_script(PAGE_HEIGHT)
    driver.set_window_size(width, min(MAX_HEIGHT[width], max(height, int(needed) + 1)))
    driver.save_screenshot(str(path))
    driver.set_window_size(width, height)
    return path


def log_in(driver, base: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    driver.find_element(By.ID, "name").send_keys("anna")
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.ID, "login").click()
    WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.ID, "logout")))


def import_conversions(driver, base: str, subids: list[str]) -> None:
    """Paste a CSV into the import page (the result page is one of the screenshots)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    lines = [
        f"{subid},{'sale' if n % 3 else 'approved_lead'},{4.5 if n % 2 else 12}"
        for n, subid in enumerate(subids)
    ]
    text = "subid,status,payout\n" + "\n".join([*lines, "not-a-click,sale,3", f"{subids[0]},sale,4.5"]) + "\n"
    driver.get(base + "/panel/conversions/import")
    area = WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.NAME, "csv")))
    driver.execute_script("arguments[0].value = arguments[1]", area, text)  # send_keys types 1 key at a time.
    area.find_element(By.XPATH, "./ancestor::form").find_element(
        By.CSS_SELECTOR, "button[type=submit]"
    ).click()
    WebDriverWait(driver, 20).until(
        seen.presence_of_element_located((By.CSS_SELECTOR, "table.import-results"))
    )


def previews(driver, base: str, out: Path) -> list[Path]:
    """The bulk forms' previews, filled as a buyer would (nothing is applied): a zone cost paste with a
    header line and zones the week has no clicks for, a URL find-and-replace over every offer, and a
    network from a catalogue template."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def fill(element_id: str, value: str) -> None:
        field = WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.ID, element_id)))
        driver.execute_script("arguments[0].value = arguments[1]", field, value)

    saved = []
    # The week's busiest zones of campaign 1, as its report by sub_id_1 lists them.
    driver.get(base + "/panel/reports?period=last_7_days&g1=sub_id_1&f.campaign=1&sort=clicks&order=desc")
    names = WebDriverWait(driver, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "table.report tbody td.name")
    )
    busiest = [name.text.split()[0] for name in names[:8] if name.text.split()[0].isdigit()]
    driver.get(base + "/panel/campaigns/1/costs/paste")
    fill("paste-from", time.strftime("%Y-%m-%d", time.gmtime(time.time() - 6 * 86400)))
    fill("paste-to", time.strftime("%Y-%m-%d", time.gmtime()))
    Select(driver.find_element(By.ID, "paste-parameter")).select_by_value("sub_id_1")
    zones = "\n".join(f"{zone}\t{(int(zone) % 7) * 1.75 + 2:.2f}" for zone in busiest)
    fill("paste-text", f"zone\tspend\n{zones}\n99999\t3.10\n{busiest[0]};$1,250.50\n4417 12\n")
    driver.find_element(By.ID, "paste-preview").click()
    WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.ID, "paste-lines")))
    saved.append(save(driver, out / "costs-paste.png", *DESKTOP))
    driver.get(base + "/panel/offers/bulk")
    for box in WebDriverWait(driver, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#bulk-rows input[name=ids]")
    ):
        box.click()
    Select(driver.find_element(By.ID, "bulk-status")).select_by_value("paused")
    fill("bulk-find", "?")
    fill("bulk-replace", "?utm_source=lanner&")
    driver.find_element(By.ID, "bulk-preview").click()
    WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.ID, "bulk-items")))
    saved.append(save(driver, out / "offers-bulk.png", *DESKTOP))
    driver.get(base + "/panel/networks")
    driver.find_element(By.CSS_SELECTOR, "details.new-network summary").click()
    driver.find_element(By.CSS_SELECTOR, "details.new-network input[name=name]").send_keys("Leadbit")
    Select(driver.find_element(By.ID, "network-template")).select_by_value("leadbit")
    driver.find_element(By.ID, "preview-network").click()
    WebDriverWait(driver, 20).until(seen.presence_of_element_located((By.ID, "network-preview")))
    driver.execute_script("document.getElementById('network-preview').scrollIntoView()")
    saved.append(save(driver, out / "network-preview.png", *DESKTOP))
    return saved


def shoot(base: str, out: Path, ids: dict, subids: list[str]) -> list[Path]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    saved = []
    driver = browser(*DESKTOP)
    try:
        driver.get(base + "/panel/login")
        saved.append(save(driver, out / "login.png", *DESKTOP))
        log_in(driver, base)
        import_conversions(driver, base, subids[:8])
        saved.append(save(driver, out / "conversions-import.png", *DESKTOP))
        for name, path in pages(ids, subids[1]):
            driver.get(base + path)
            if name == "campaign":  # The editor loads its simulate form by htmx.
                WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#simulate form"))
            saved.append(save(driver, out / f"{name}.png", *DESKTOP))
        saved.extend(previews(driver, base, out))
        # The zones of campaign 3 with their labels, the blacklist's downloads and the push button.
        driver.get(
            base + f"/panel/reports?period=last_7_days&g1=sub_id_1&f.campaign=3&f.sub_id_1={ids['zones']}"
        )
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "push-form"))
        driver.execute_script("document.getElementById('push-form').scrollIntoView({block: 'end'})")
        saved.append(save(driver, out / "labels-push.png", *DESKTOP))
    finally:
        driver.quit()
    driver = browser(*PHONE)
    try:
        driver.get(base + "/panel/login")
        log_in(driver, base)
        for name, path in (
            ("dashboard", "/panel?period=last_7_days"),
            ("campaigns", "/panel/campaigns?period=last_7_days"),
        ):
            driver.get(base + path)
            saved.append(save(driver, out / f"{name}-phone.png", *PHONE))
    finally:
        driver.quit()
    return saved


def main(out: Path = DEFAULT_OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lanner-screens-") as tmp:
        data_dir = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        env.update(LANNER_DATA_DIR=str(data_dir), LANNER_LOG_LEVEL="INFO", PYTHONPATH=str(ROOT))
        ids = seed(data_dir)
        process, web_port, admin_port = serve(data_dir, env)
        try:
            subids = send_clicks(web_port)
            subprocess.run(
                [sys.executable, "-m", "cli", "spool", "flush"],
                env=env,
                cwd=ROOT,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            for path in shoot(f"http://127.0.0.1:{admin_port}", out, ids, subids):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DEFAULT_OUT)
