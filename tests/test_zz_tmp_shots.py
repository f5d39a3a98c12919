from conftest import browser_required
pytestmark = browser_required
PASSWORD = "correct horse battery"

def test_shots(browser, start_server, db):
    from selenium.webdriver.common.by import By
    from models.accounts.users import add_user, update_user
    from models.accounts.apikeys import create_api_key
    from models.accounts.sharing import share_campaign
    from models.admin.services import update_campaign
    from workers.bench.generate import generate_clicks
    generate_clicks(db, 300, 1, campaigns=3, seed=3)
    add_user(db, "anna", "admin", PASSWORD, timezone="Europe/Berlin")
    bert = add_user(db, "bert", "buyer", PASSWORD)
    add_user(db, "vera", "viewer", PASSWORD, hides_money=True)
    update_campaign(db, 1, name="<b>Spring</b> sale", owner_id=bert.id)
    share_campaign(db, 2, "bert", may_edit=True)
    create_api_key(db, "bert", "read", label="nightly export")
    update_user(db, "vera", is_disabled=True)
    server = start_server(workers=1)
    base = f"http://127.0.0.1:{server.extra['admin_port']}"
    browser.get(base + "/panel/login")
    browser.find_element(By.ID, "name").send_keys("anna")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login").click()
    for name, path in (("users", "/panel/users"), ("user", f"/panel/users/{bert.id}"), ("audit", "/panel/audit"),
                       ("status", "/panel/status"), ("account", "/panel/account")):
        browser.get(base + path)
        browser.set_window_size(1280, 900)
        h = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1280, min(h + 100, 2400))
        browser.save_screenshot(f"/tmp/ppl/{name}.png")
    browser.set_window_size(1280, 900)
