"""Save screenshots of each web panel page to docs/panel/ (the README shows them).

Seeds a throwaway install (a temporary data directory: 5 campaigns, a week of generated clicks, an
admin), runs `lanner serve` on ports the kernel picks, and drives Debian's chromium headless through
Selenium (`apt-get install chromium chromium-driver`; selenium is in the test extra). Run from the
repository root, with Lanner importable:

    python scripts/panel_screenshots.py [docs/panel]
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs/panel"
PASSWORD = "screenshot password"
NAMES = ("Spring sale – FB", "Search brand US", "Push DE mobile", "Native retargeting", "TikTok test")


def seed(data_dir: Path) -> None:
    from models.accounts.users import add_user
    from models.admin.services import update_campaign
    from models.migrations.runner import migrate
    from models.store.database import open_database
    from settings import load_settings
    from workers.bench.generate import generate_clicks

    settings = load_settings({"LANNER_DATA_DIR": str(data_dir)})
    db = open_database(settings.database_path, autocheckpoint=True)
    migrate(db)
    generate_clicks(db, 6000, 7, campaigns=len(NAMES), seed=16)
    for campaign_id, name in enumerate(NAMES, start=1):
        update_campaign(db, campaign_id, name=name, cost_value=0.02 * campaign_id)
    update_campaign(db, 5, status="paused")
    add_user(db, "anna", "admin", PASSWORD)
    db.close()


def serve(data_dir: Path) -> tuple[subprocess.Popen, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(LANNER_DATA_DIR=str(data_dir), LANNER_LOG_LEVEL="INFO", PYTHONPATH=str(ROOT))
    log = open(data_dir / "serve.log", "w+")
    args = [sys.executable, "-m", "cli", "serve", "--workers", "1", "--bind", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*args, "--admin-bind", "127.0.0.1:0"], env=env, cwd=ROOT, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"admin: listening on 127\.0\.0\.1:(\d+) ", (data_dir / "serve.log").read_text())
        if found:
            return process, int(found.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit("lanner serve did not start:\n" + (data_dir / "serve.log").read_text())


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
                     f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def shoot(base: str, out: Path) -> list[Path]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    saved = []
    for suffix, (width, height) in (("", (1280, 900)), ("-phone", (390, 844))):
        driver = browser(width, height)
        try:
            wait = WebDriverWait(driver, 20)
            driver.get(base + "/panel/login")
            if not suffix:
                saved.append(out / "login.png")
                driver.save_screenshot(str(saved[-1]))
            driver.find_element(By.ID, "name").send_keys("anna")
            driver.find_element(By.ID, "password").send_keys(PASSWORD)
            driver.find_element(By.ID, "login").click()
            wait.until(seen.presence_of_element_located((By.ID, "chart")))
            for page, path in (
                ("dashboard", "/panel?period=last_7_days"),
                ("campaigns", "/panel/campaigns?period=last_7_days"),
            ):
                driver.get(base + path)
                wait.until(seen.presence_of_element_located((By.TAG_NAME, "table")))
                time.sleep(0.5)  # The chart draws after DOMContentLoaded.
                height_needed = driver.execute_script("return document.documentElement.scrollHeight")
                driver.set_window_size(width, max(height, height_needed + 20))
                saved.append(out / f"{page}{suffix}.png")
                driver.save_screenshot(str(saved[-1]))
                driver.set_window_size(width, height)
        finally:
            driver.quit()
    return saved


def main(out: Path = DEFAULT_OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lanner-screens-") as tmp:
        data_dir = Path(tmp)
        seed(data_dir)
        process, port = serve(data_dir)
        try:
            for path in shoot(f"http://127.0.0.1:{port}", out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DEFAULT_OUT)
