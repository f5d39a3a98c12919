"""`lanner user ...`, `lanner api key ...` and `lanner campaign --owner` as a user runs them, against a real
file."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import select
import signal
import subprocess

from conftest import LANNER, ROOT

PASSWORD = "correct horse battery"


def lanner_input(env: dict[str, str], text: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI with `text` on its stdin (not a terminal)."""
    return subprocess.run(
        [*LANNER, *args], env=env, cwd=ROOT, input=text, capture_output=True, text=True, timeout=120
    )


def add(env, name: str, role: str, *extra: str, password: str = PASSWORD) -> subprocess.CompletedProcess:
    return lanner_input(env, password + "\n", "user", "add", name, "--role", role, "--password-stdin", *extra)


def stored_user(db, name: str):
    from models.accounts.users import get_user

    return get_user(db, name)


def test_user_add_reads_the_password_from_stdin_and_user_list_prints_table_json_and_csv(lanner, env, db):
    from models.accounts.passwords import verify_password

    assert add(env, "anna", "buyer").stdout.strip() == "User anna (buyer) added."
    assert add(env, "Vera", "viewer", "--hide-money").returncode == 0
    assert verify_password(stored_user(db, "anna"), PASSWORD)
    assert stored_user(db, "vera").hides_money

    table = lanner("user", "list").stdout.splitlines()
    assert table[0].split() == [
        "id",
        "name",
        "role",
        "hide_money",
        "disabled",
        "timezone",
        "last_login_at",
        "created_at",
        "updated_at",
    ]
    assert table[1].split()[:5] == ["1", "anna", "buyer", "False", "False"]
    listed = json.loads(lanner("user", "list", "--json").stdout)
    assert [(u["name"], u["role"], u["hide_money"]) for u in listed] == [
        ("anna", "buyer", False),
        ("Vera", "viewer", True),
    ]
    assert all("password" not in key for row in listed for key in row)
    rows = list(csv.DictReader(io.StringIO(lanner("user", "list", "--csv").stdout)))
    assert [row["name"] for row in rows] == ["anna", "Vera"]


def test_a_user_s_timezone_is_set_at_add_and_update_and_checked_as_a_campaign_s(lanner, env, db):
    assert add(env, "anna", "buyer", "--timezone", "America/New_York").returncode == 0
    assert stored_user(db, "anna").timezone == "America/New_York"
    bad = add(env, "bert", "buyer", "--timezone", "Mars/Olympus")
    assert bad.returncode == 1 and "Unknown timezone 'Mars/Olympus'" in bad.stderr
    assert lanner("user", "update", "anna", "--timezone", "Europe/Berlin").returncode == 0
    assert json.loads(lanner("user", "list", "--json").stdout)[0]["timezone"] == "Europe/Berlin"
    assert lanner("user", "update", "anna", "--timezone", "").returncode == 0  # Back to the default, UTC.
    assert stored_user(db, "anna").timezone == ""
    refused = lanner("user", "update", "anna", "--timezone", "../etc/passwd", check=False)
    assert refused.returncode == 1 and "Unknown timezone" in refused.stderr


def test_user_add_refuses_a_short_password_a_bad_name_and_a_taken_one_in_one_sentence(lanner, env):
    short = add(env, "anna", "buyer", password="123456789")
    assert short.returncode == 1
    assert short.stderr.strip() == "Error: A password must be at least 10 characters long."
    bad = add(env, "not ok", "buyer")
    assert bad.returncode == 1 and bad.stderr.startswith("Error: A user name must be 1-64 letters")
    assert add(env, "anna", "buyer").returncode == 0
    taken = add(env, "ANNA", "viewer")
    assert taken.returncode == 1
    assert taken.stderr.strip() == "Error: A user named 'anna' exists already (names ignore case)."
    for result in (short, bad, taken):
        assert "Traceback" not in result.stderr
    assert len(json.loads(lanner("user", "list", "--json").stdout)) == 1


def run_on_a_terminal(env: dict[str, str], answers: list[str], *args: str) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as its controlling terminal, typing `answers` at its prompts;
    returns its exit status and everything the terminal showed. A prompt with no answer left, or
    30 s without output, kills it (the test then fails on what it showed)."""
    pid, fd = pty.fork()
    if pid == 0:  # The child: the terminal is its stdin, stdout, stderr and /dev/tty.
        os.chdir(ROOT)
        os.execve(LANNER[0], [*LANNER, *args], env)
    shown = b""
    pending = list(answers)
    try:
        while select.select([fd], [], [], 30)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child has exited and closed the terminal.
                break
            if not chunk:
                break
            shown += chunk
            if shown.endswith(b": "):  # A prompt (the answer echoed back ends in a newline).
                if not pending:
                    break
                os.write(fd, pending.pop(0).encode() + b"\n")
    finally:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == 0:  # Still running: stuck at a prompt, or silent for 30 s.
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_user_add_at_a_terminal_asks_twice_without_echoing_the_password(lanner, env, db):
    from models.accounts.passwords import verify_password

    code, shown = run_on_a_terminal(env, [PASSWORD, PASSWORD], "user", "add", "anna", "--role", "admin")
    assert code == 0, shown
    assert "Password:" in shown and "Repeat for confirmation:" in shown
    assert PASSWORD not in shown
    assert "User anna (admin) added." in shown
    assert verify_password(stored_user(db, "anna"), PASSWORD)

    # Two different answers: asked again, and only a confirmed password is set.
    answers = [PASSWORD, "a different password", "a third password", "a third password"]
    code, shown = run_on_a_terminal(env, answers, "user", "passwd", "anna")
    assert code == 0, shown
    assert "Error: The two entered values do not match." in shown
    assert "password" not in shown.replace("Password", "").replace("Password of anna changed.", "")
    assert verify_password(stored_user(db, "anna"), "a third password")


def test_user_passwd_changes_the_password(lanner, env, db):
    from models.accounts.passwords import verify_password

    add(env, "anna", "buyer")
    changed = lanner_input(env, "a new long password\n", "user", "passwd", "anna", "--password-stdin")
    assert changed.stdout.strip() == "Password of anna changed."
    assert verify_password(stored_user(db, "anna"), "a new long password")
    assert not verify_password(stored_user(db, "anna"), PASSWORD)
    unknown = lanner_input(env, "a new long password\n", "user", "passwd", "nobody", "--password-stdin")
    assert unknown.returncode == 1 and unknown.stderr.strip() == "Error: There is no user 'nobody'."


def test_user_remove_refuses_the_last_admin_and_removes_others(lanner, env):
    add(env, "root", "admin")
    add(env, "anna", "buyer")
    last = lanner("user", "remove", "root", check=False)
    assert last.returncode == 1
    assert last.stderr.strip() == (
        "Error: 'root' is the last enabled admin and cannot be removed; add another admin first."
    )
    assert lanner("user", "remove", "anna").stdout.strip() == "User anna removed."
    assert [u["name"] for u in json.loads(lanner("user", "list", "--json").stdout)] == ["root"]


def test_user_update_disables_demotes_and_hides_money(lanner, env, db):
    add(env, "root", "admin")
    add(env, "anna", "buyer")
    out = lanner("user", "update", "anna", "--disable", "--hide-money", "--role", "viewer").stdout
    assert out.strip() == "User anna updated: viewer, disabled."
    anna = stored_user(db, "anna")
    assert (anna.role, anna.is_disabled, anna.hides_money) == ("viewer", True, True)
    lanner("user", "update", "anna", "--enable", "--show-money")
    anna = stored_user(db, "anna")
    assert (anna.role, anna.is_disabled, anna.hides_money) == ("viewer", False, False)


def test_user_share_and_unshare_and_campaign_owner(lanner, env, db):
    from models.accounts.access import editable_campaign_ids, visible_campaign_ids
    from models.accounts.principal import user_principal

    add(env, "anna", "buyer")
    add(env, "bob", "buyer")
    lanner(
        "campaign",
        "create",
        "Hers",
        "--alias",
        "hers",
        "--offer-url",
        "https://o.example/",
        "--owner",
        "anna",
    )
    lanner("campaign", "create", "Shared", "--alias", "shared", "--offer-url", "https://o.example/")
    assert (
        json.loads(lanner("campaign", "show", "hers", "--json").stdout)["owner_id"]
        == stored_user(db, "anna").id
    )

    def bob():
        user = stored_user(db, "bob")
        return user_principal(user.id, user.name, user.role, user.hides_money)

    assert lanner("user", "share", "shared", "bob").stdout.strip() == "Campaign shared shared with bob."
    assert visible_campaign_ids(db, bob()) == {2} and editable_campaign_ids(db, bob()) == set()
    assert "who may edit it" in lanner("user", "share", "shared", "bob", "--edit").stdout
    assert editable_campaign_ids(db, bob()) == {2}
    lanner("campaign", "update", "hers", "--owner", "bob")
    assert visible_campaign_ids(db, bob()) == {1, 2}
    lanner("campaign", "update", "hers", "--no-owner")
    assert (
        lanner("user", "unshare", "shared", "bob").stdout.strip()
        == "Campaign shared no longer shared with bob."
    )
    assert visible_campaign_ids(db, bob()) == set()
    refused = lanner("user", "unshare", "shared", "bob", check=False)
    assert (
        refused.returncode == 1
        and refused.stderr.strip() == "Error: Campaign 'shared' is not shared with 'bob'."
    )
    nobody = lanner("campaign", "update", "hers", "--owner", "carol", check=False)
    assert nobody.returncode == 1 and nobody.stderr.strip() == "Error: There is no user 'carol'."


def test_api_key_create_prints_the_key_once_list_never_shows_it_and_revoke_ends_it(lanner, env, db):
    from models.accounts.apikeys import authenticate_api_key

    add(env, "anna", "buyer")
    created = lanner(
        "api", "key", "create", "--user", "anna", "--scope", "write", "--label", "nightly export"
    )
    key = created.stdout.strip()
    assert key.startswith("lnr_") and "\n" not in key
    assert "shown once" in created.stderr
    principal = authenticate_api_key(db, key)
    assert (principal.name, principal.role, principal.can_write) == ("anna", "buyer", True)

    listed = lanner("api", "key", "list", "--json").stdout
    assert key not in listed
    (row,) = json.loads(listed)
    assert (row["id"], row["user"], row["scope"], row["label"], row["prefix"], row["revoked"]) == (
        1,
        "anna",
        "write",
        "nightly export",
        key[:12],
        False,
    )
    assert row["last_used_at"] is not None  # authenticate_api_key above used it.
    assert "nightly export" in lanner("api", "key", "list").stdout

    assert lanner("api", "key", "revoke", "1").stdout.strip() == "API key 1 revoked."
    assert authenticate_api_key(db, key) is None
    assert json.loads(lanner("api", "key", "list", "--json").stdout)[0]["revoked"] is True
    again = lanner("api", "key", "revoke", "1", check=False)
    assert again.returncode == 1 and again.stderr.strip() == "Error: API key 1 is revoked already."


def test_api_key_create_refuses_a_write_key_for_a_viewer_and_an_unknown_user(lanner, env):
    add(env, "vera", "viewer")
    viewer = lanner("api", "key", "create", "--user", "vera", "--scope", "write", check=False)
    assert viewer.returncode == 1
    assert viewer.stderr.strip() == "Error: 'vera' is a viewer, who never writes: give them a read key."
    unknown = lanner("api", "key", "create", "--user", "nobody", "--scope", "read", check=False)
    assert unknown.returncode == 1 and unknown.stderr.strip() == "Error: There is no user 'nobody'."
    assert json.loads(lanner("api", "key", "list", "--json").stdout) == []


def test_the_install_key_commands_keep_working(lanner, db):
    from models.accounts.apikeys import authenticate_api_key
    from models.accounts.principal import INSTALL_KEY

    shown = lanner("api", "key", "show").stdout.strip()
    assert authenticate_api_key(db, shown) == INSTALL_KEY
    rotated = lanner("api", "key", "rotate", "--yes").stdout.strip()
    assert rotated != shown and authenticate_api_key(db, rotated) == INSTALL_KEY
    assert authenticate_api_key(db, shown) is None


def test_user_first_admin_prints_a_password_once_and_nothing_once_a_user_exists(lanner, db):
    from models.accounts.passwords import verify_password

    printed = lanner("user", "first-admin").stdout
    password = printed.split("password: ")[1].split(" ")[0]
    assert printed.startswith("First admin: admin, password: ")
    assert verify_password(stored_user(db, "admin"), password)
    assert lanner("user", "first-admin").stdout == ""
    assert [u["name"] for u in json.loads(lanner("user", "list", "--json").stdout)] == ["admin"]
