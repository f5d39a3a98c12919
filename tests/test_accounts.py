"""Accounts: passwords, users, roles and what each sees and edits, API keys, the principal a key opens,
and migration 0008 on an install upgraded from 0007. The CLI's commands are in test_accounts_cli.py."""

from __future__ import annotations

import hashlib
import importlib

import pytest
from argon2 import PasswordHasher

from models.accounts.access import (
    creates_campaigns,
    editable_campaign_ids,
    edits_campaign,
    sees_campaign,
    visible_campaign_ids,
)
from models.accounts.apikeys import (
    LAST_USED_EVERY_MS,
    authenticate_api_key,
    create_api_key,
    list_api_keys,
    revoke_api_key,
)
from models.accounts.errors import AccountError
from models.accounts.passwords import verify_password
from models.accounts.principal import CLI, INSTALL_KEY, Principal, user_principal
from models.accounts.sharing import campaign_shares, share_campaign, unshare_campaign
from models.accounts.users import (
    add_user,
    ensure_first_admin,
    find_user,
    get_user,
    list_users,
    remove_user,
    set_password,
    update_user,
)
from models.admin.services import AdminError, create_campaign, update_campaign
from models.store.accounts import AccountStore

PASSWORD = "correct horse battery"


def principal_of(db, name: str, scope: str = "write") -> Principal:
    user = get_user(db, name)
    return user_principal(user.id, user.name, user.role, user.hides_money, scope=scope)


def campaign(db, alias: str, owner: str | None = None) -> int:
    owner_id = get_user(db, owner).id if owner else None
    return create_campaign(db, alias, alias, offer_url="https://o.example/", owner_id=owner_id).id


# -- passwords ---------------------------------------------------------------------------------


def test_passwords_are_argon2id_with_the_stated_parameters_and_only_the_right_one_verifies(db):
    user = add_user(db, "anna", "buyer", PASSWORD)
    assert user.password_hash.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert PASSWORD not in user.password_hash
    assert verify_password(user, PASSWORD) is True
    assert verify_password(user, PASSWORD + " ") is False
    assert verify_password(user, "") is False


@pytest.mark.parametrize("password", ["", "123456789", "ninechars"])
def test_a_password_under_ten_characters_is_refused_in_one_sentence(db, password):
    with pytest.raises(AccountError, match=r"^A password must be at least 10 characters long\.$"):
        add_user(db, "anna", "buyer", password)
    assert list_users(db) == []


def test_a_hash_made_with_other_parameters_is_redone_at_the_next_successful_login(db):
    user = add_user(db, "anna", "buyer", PASSWORD)
    old = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=2).hash(PASSWORD)
    AccountStore(db.connection()).set_password_hash(user.id, old, 0)
    weak = get_user(db, "anna")
    assert weak.password_hash == old

    assert verify_password(weak, "wrong password!") is False
    assert get_user(db, "anna").password_hash == old  # A failed login rehashes nothing.
    assert verify_password(weak, PASSWORD) is True
    rehashed = get_user(db, "anna")
    assert rehashed.password_hash.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert verify_password(rehashed, PASSWORD) is True


def test_a_rehash_never_overwrites_a_password_changed_meanwhile(db):
    user = add_user(db, "anna", "buyer", PASSWORD)
    AccountStore(db.connection()).set_password_hash(user.id, PasswordHasher(time_cost=1).hash(PASSWORD), 0)
    stale = get_user(db, "anna")
    set_password(db, "anna", "a brand new password")
    assert verify_password(stale, PASSWORD) is True  # It verified the hash it was given ...
    current = get_user(db, "anna")  # ... but the stored one is the new password's.
    assert verify_password(current, "a brand new password") and not verify_password(current, PASSWORD)


def test_a_disabled_user_never_logs_in_and_enabled_again_does(db):
    add_user(db, "root", "admin", PASSWORD)
    add_user(db, "anna", "buyer", PASSWORD)
    disabled = update_user(db, "anna", is_disabled=True)
    assert disabled.is_disabled and verify_password(disabled, PASSWORD) is False
    assert verify_password(update_user(db, "anna", is_disabled=False), PASSWORD) is True


# -- users -------------------------------------------------------------------------------------


def test_names_ignore_case_and_keep_the_spelling_first_written(db):
    add_user(db, "Anna.K@example.com", "buyer", PASSWORD)
    assert get_user(db, "anna.k@EXAMPLE.com").name == "Anna.K@example.com"
    with pytest.raises(AccountError, match=r"A user named 'Anna.K@example.com' exists already"):
        add_user(db, "anna.k@example.com", "viewer", PASSWORD)
    assert [user.name for user in list_users(db)] == ["Anna.K@example.com"]


@pytest.mark.parametrize("name", ["", "-dash", "white space", "x" * 65, "ünïcode", "a/b"])
def test_a_name_outside_the_pattern_is_refused(db, name):
    with pytest.raises(AccountError, match=r"^A user name must be 1-64 letters"):
        add_user(db, name, "buyer", PASSWORD)


def test_an_unknown_role_is_refused(db):
    with pytest.raises(AccountError, match=r"^A role must be one of admin, buyer, viewer, not 'owner'\.$"):
        add_user(db, "anna", "owner", PASSWORD)


def test_the_last_enabled_admin_cannot_be_removed_disabled_or_demoted(db):
    add_user(db, "root", "admin", PASSWORD)
    for change in (
        lambda: remove_user(db, "root"),
        lambda: update_user(db, "root", is_disabled=True),
        lambda: update_user(db, "root", role="buyer"),
    ):
        with pytest.raises(AccountError, match=r"^'root' is the last enabled admin and cannot be"):
            change()
    add_user(db, "second", "admin", PASSWORD)
    update_user(db, "second", is_disabled=True)  # A disabled admin is no admin to fall back on.
    with pytest.raises(AccountError, match="last enabled admin"):
        remove_user(db, "root")
    update_user(db, "second", is_disabled=False)
    remove_user(db, "root")
    assert [user.name for user in list_users(db)] == ["second"]


def test_removing_a_user_takes_their_keys_and_shares_and_leaves_their_campaigns_to_admins(db):
    add_user(db, "root", "admin", PASSWORD)
    add_user(db, "anna", "buyer", PASSWORD)
    add_user(db, "bob", "buyer", PASSWORD)
    owned = campaign(db, "owned", owner="anna")
    other = campaign(db, "other", owner="bob")
    share_campaign(db, "other", "anna")
    _, key = create_api_key(db, "anna", "write")
    remove_user(db, "anna")
    assert find_user(db, "anna") is None
    assert authenticate_api_key(db, key) is None and list_api_keys(db) == []
    assert campaign_shares(db, other) == []
    assert AccountStore(db.connection()).campaign_owner(owned) is None
    assert visible_campaign_ids(db, principal_of(db, "bob")) == {other}


def test_ensure_first_admin_creates_one_admin_once_with_a_password_that_logs_in(db):
    name, password = ensure_first_admin(db)
    assert name == "admin" and len(password) >= 16
    admin = get_user(db, "admin")
    assert admin.role == "admin" and verify_password(admin, password)
    assert ensure_first_admin(db) is None
    assert [user.name for user in list_users(db)] == ["admin"]


def test_ensure_first_admin_adds_nobody_once_any_user_exists(db):
    add_user(db, "viewer1", "viewer", PASSWORD)
    assert ensure_first_admin(db) is None
    assert [user.name for user in list_users(db)] == ["viewer1"]


# -- roles and visibility ----------------------------------------------------------------------


@pytest.fixture
def team(db):
    """root (admin), anna and bob (buyers), vera (viewer); campaigns a (anna's), b (bob's), c (nobody's);
    b shared with anna to view, a with bob to edit, c with vera."""
    for name, role in (("root", "admin"), ("anna", "buyer"), ("bob", "buyer"), ("vera", "viewer")):
        add_user(db, name, role, PASSWORD)
    ids = {"a": campaign(db, "a", owner="anna"), "b": campaign(db, "b", owner="bob"), "c": campaign(db, "c")}
    share_campaign(db, "b", "anna")
    share_campaign(db, "a", "bob", may_edit=True)
    share_campaign(db, "c", "vera")
    return ids


def test_admins_see_and_edit_everything_buyers_their_own_and_shared_viewers_what_is_shared(db, team):
    a, b, c = team["a"], team["b"], team["c"]
    root, anna, bob, vera = (principal_of(db, name) for name in ("root", "anna", "bob", "vera"))
    assert visible_campaign_ids(db, root) is None and editable_campaign_ids(db, root) is None
    assert visible_campaign_ids(db, anna) == {a, b} and editable_campaign_ids(db, anna) == {a}
    assert visible_campaign_ids(db, bob) == {a, b} and editable_campaign_ids(db, bob) == {a, b}
    assert visible_campaign_ids(db, vera) == {c} and editable_campaign_ids(db, vera) == set()
    assert not sees_campaign(db, anna, c) and sees_campaign(db, root, c) and sees_campaign(db, vera, c)
    assert edits_campaign(db, bob, a) and not edits_campaign(db, anna, b) and not edits_campaign(db, vera, c)
    assert creates_campaigns(anna) and creates_campaigns(root) and not creates_campaigns(vera)


def test_a_viewer_who_owns_a_campaign_still_never_writes_it(db, team):
    update_campaign(db, "c", owner_id=get_user(db, "vera").id)
    vera = principal_of(db, "vera")
    assert vera.can_write is False
    assert sees_campaign(db, vera, team["c"]) and not edits_campaign(db, vera, team["c"])


def test_a_read_key_edits_nothing_whatever_its_users_role(db, team):
    for name in ("root", "anna"):
        reader = principal_of(db, name, scope="read")
        assert reader.can_write is False and editable_campaign_ids(db, reader) == set()
        assert not creates_campaigns(reader)
    assert visible_campaign_ids(db, principal_of(db, "anna", scope="read")) == {team["a"], team["b"]}


def test_the_install_key_and_the_cli_are_admins_with_write(db, team):
    for principal in (INSTALL_KEY, CLI):
        assert principal.can_write and principal.is_admin and not principal.hides_money
        assert visible_campaign_ids(db, principal) is None and edits_campaign(db, principal, team["c"])


def test_sharing_again_changes_may_edit_and_unsharing_takes_sight_away(db, team):
    anna = principal_of(db, "anna")
    share_campaign(db, "b", "anna", may_edit=True)
    assert edits_campaign(db, anna, team["b"])
    assert campaign_shares(db, team["b"]) == [("anna", True)]
    unshare_campaign(db, "b", "anna")
    assert not sees_campaign(db, anna, team["b"])
    with pytest.raises(AccountError, match=r"^Campaign 'b' is not shared with 'anna'\.$"):
        unshare_campaign(db, "b", "anna")


def test_a_campaign_s_shares_are_listed_by_name_ignoring_case_as_sqlite_s_nocase_sorts(db, team):
    # ASCII folded, then the bytes: '-' < '.' < '@' < '_' (an ICU collation would put '_' first).
    for name in ("a_b", "A.b", "a-b", "a@b", "B9"):
        add_user(db, name, "buyer", PASSWORD)
        share_campaign(db, "b", name)
    assert [name for name, _ in campaign_shares(db, team["b"])] == ["a-b", "A.b", "a@b", "a_b", "anna", "B9"]


def test_sharing_with_an_admin_or_the_owner_is_refused(db, team):
    with pytest.raises(AccountError, match=r"^'root' is an admin and sees every campaign already\.$"):
        share_campaign(db, "a", "root")
    with pytest.raises(AccountError, match=r"^'anna' owns campaign 'a' already\.$"):
        share_campaign(db, "a", "anna")
    with pytest.raises(AdminError, match="There is no campaign 'nope'"):
        share_campaign(db, "nope", "anna")


def test_a_campaign_a_buyer_creates_is_theirs_and_one_the_cli_creates_is_nobodys(db, team):
    anna = principal_of(db, "anna")
    mine = create_campaign(db, "Mine", "mine", offer_url="https://o.example/", actor=anna)
    assert mine.owner_id == anna.user_id
    assert create_campaign(db, "Cli", "cli-made", offer_url="https://o.example/").owner_id is None
    assert visible_campaign_ids(db, anna) == {team["a"], team["b"], mine.id}


def test_an_owner_who_is_no_user_is_refused_and_no_owner_clears_it(db, team):
    with pytest.raises(AdminError, match=r"^There is no user with id 999 to own the campaign\.$"):
        update_campaign(db, "a", owner_id=999)
    assert update_campaign(db, "a", clear_owner=True).owner_id is None
    assert visible_campaign_ids(db, principal_of(db, "anna")) == {team["b"]}


# -- API keys ----------------------------------------------------------------------------------


def test_a_key_is_shown_once_and_stored_only_as_its_sha256(db):
    add_user(db, "anna", "buyer", PASSWORD)
    created, key = create_api_key(db, "anna", "read", label="export")
    assert key.startswith("lnr_") and len(key) == 4 + 43
    stored = db.connection().execute("SELECT * FROM api_key").fetchall()
    assert all(key not in str(value) for row in stored for value in row)
    assert db.connection().execute("SELECT key_hash FROM api_key").fetchone() == (
        hashlib.sha256(key.encode()).hexdigest(),
    )
    assert (created.prefix, created.label, created.scope, created.user) == (
        key[:12],
        "export",
        "read",
        "anna",
    )
    assert create_api_key(db, "anna", "read")[1] != key


def test_key_scopes_give_write_only_to_a_write_key_of_a_user_who_writes(db):
    add_user(db, "anna", "buyer", PASSWORD)
    add_user(db, "vera", "viewer", PASSWORD, hides_money=True)
    _, writer = create_api_key(db, "anna", "write")
    _, reader = create_api_key(db, "anna", "read")
    _, viewer = create_api_key(db, "vera", "read")
    anna_id, vera_id = get_user(db, "anna").id, get_user(db, "vera").id
    assert authenticate_api_key(db, writer) == Principal(anna_id, "anna", "buyer", True, False)
    assert authenticate_api_key(db, reader) == Principal(anna_id, "anna", "buyer", False, False)
    assert authenticate_api_key(db, viewer) == Principal(vera_id, "vera", "viewer", False, True)
    with pytest.raises(AccountError, match=r"^'vera' is a viewer, who never writes: give them a read key\.$"):
        create_api_key(db, "vera", "write")
    with pytest.raises(AccountError, match=r"^A key's scope must be one of read, write, not 'admin'\.$"):
        create_api_key(db, "anna", "admin")


def test_a_key_whose_user_became_a_viewer_no_longer_writes(db):
    add_user(db, "root", "admin", PASSWORD)
    add_user(db, "anna", "buyer", PASSWORD)
    _, key = create_api_key(db, "anna", "write")
    update_user(db, "anna", role="viewer")
    assert authenticate_api_key(db, key).can_write is False


def test_a_revoked_key_opens_nothing_and_is_still_listed(db):
    add_user(db, "anna", "buyer", PASSWORD)
    created, key = create_api_key(db, "anna", "write")
    _, other = create_api_key(db, "anna", "write")
    assert revoke_api_key(db, created.id).is_revoked
    assert authenticate_api_key(db, key) is None
    assert authenticate_api_key(db, other) is not None
    assert [(k.id, k.is_revoked) for k in list_api_keys(db)] == [(created.id, True), (created.id + 1, False)]
    with pytest.raises(AccountError, match=rf"^API key {created.id} is revoked already\.$"):
        revoke_api_key(db, created.id)
    with pytest.raises(AccountError, match=r"^There is no API key 999\.$"):
        revoke_api_key(db, 999)


def test_a_disabled_users_keys_open_nothing_until_enabled_again(db):
    add_user(db, "root", "admin", PASSWORD)
    add_user(db, "anna", "buyer", PASSWORD)
    _, key = create_api_key(db, "anna", "read")
    update_user(db, "anna", is_disabled=True)
    assert authenticate_api_key(db, key) is None
    update_user(db, "anna", is_disabled=False)
    assert authenticate_api_key(db, key) is not None


@pytest.mark.parametrize("given", ["", "lnr_", "lnr_" + "A" * 43, "not a key at all", "x" * 5000])
def test_an_unknown_or_empty_key_opens_nothing(db, given):
    add_user(db, "anna", "buyer", PASSWORD)
    create_api_key(db, "anna", "write")
    assert authenticate_api_key(db, given) is None


def trace_statements(conn, record):
    """Pass every statement `conn` runs to `record`; the function that stops it. sqlite3 has a trace
    callback; on psycopg a cursor class that records does it (peewee's BEGIN runs on a cursor too)."""
    if hasattr(conn, "set_trace_callback"):
        conn.set_trace_callback(record)
        return lambda: conn.set_trace_callback(None)
    plain = conn.cursor_factory

    class RecordingCursor(plain):
        def execute(self, query, params=None, **kwargs):
            record(query if isinstance(query, str) else query.as_string(conn))
            return super().execute(query, params, **kwargs)

    conn.cursor_factory = RecordingCursor

    def stop() -> None:
        conn.cursor_factory = plain

    return stop


def test_last_used_moves_at_most_once_a_minute_and_polling_meanwhile_takes_no_write_lock(db, clock):
    add_user(db, "anna", "buyer", PASSWORD)
    created, key = create_api_key(db, "anna", "read")
    assert created.last_used_at is None
    start_ms = int(clock() * 1000)
    statements: list[str] = []
    stop_tracing = trace_statements(db.connection(), statements.append)

    def last_used() -> int | None:
        return list_api_keys(db)[0].last_used_at

    def writes() -> list[str]:
        return [sql for sql in statements if sql.startswith(("BEGIN", "UPDATE", "SAVEPOINT"))]

    try:
        authenticate_api_key(db, key, clock=clock)
        assert last_used() == start_ms and len(writes()) == 2  # BEGIN IMMEDIATE, the UPDATE.
        statements.clear()
        for _ in range(5):
            clock.advance(10)  # 50 s of polling every 10 s: reads only.
            assert authenticate_api_key(db, key, clock=clock) is not None
        assert writes() == [] and last_used() == start_ms
        clock.advance(LAST_USED_EVERY_MS / 1000 - 50)
        authenticate_api_key(db, key, clock=clock)
        assert last_used() == start_ms + LAST_USED_EVERY_MS
    finally:
        stop_tracing()


def test_the_install_key_is_an_admin_key_with_write_until_rotated(db):
    from models.conversions.postbacks import read_secret, rotate_secret

    install = read_secret(db, "api_key")
    assert install and authenticate_api_key(db, install) == Principal(
        None, "install key", "admin", True, False
    )
    assert authenticate_api_key(db, install[:-1]) is None
    assert authenticate_api_key(db, rotate_secret(db, "api_key")) == INSTALL_KEY
    assert authenticate_api_key(db, install) is None


def test_principal_names_the_api_contract():
    import dataclasses

    assert [field.name for field in dataclasses.fields(Principal)] == [
        "user_id",
        "name",
        "role",
        "can_write",
        "hides_money",
        "timezone",
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        INSTALL_KEY.role = "viewer"  # type: ignore[misc]


# -- migration 0008 ----------------------------------------------------------------------------


def test_0008_upgrades_an_install_from_0007_with_its_campaigns_clicks_and_install_key(settings):
    from models.migrations.deferred import run_deferred
    from models.migrations.runner import migrate, schema_is_current
    from models.store.database import db as database
    from models.store.database import open_database
    from workers.bench.generate import generate_clicks

    open_database(settings.database_location, autocheckpoint=True)
    try:
        migrate(database, up_to="0007_currencies")
        assert generate_clicks(database, 300, 1, campaigns=2, seed=8, end_ms=1_800_000_000_000) == 300
        run_deferred(database, pause=0)
        install_key = database.execute_sql("SELECT value FROM meta WHERE key = 'api_key'").fetchone()[0]
        before = database.execute_sql("SELECT id, alias, name FROM campaign ORDER BY id").fetchall()

        assert migrate(database)[:1] == ["0008_accounts"]  # Then any later ones.
        assert schema_is_current(database)
        assert importlib.import_module("models.migrations.0008_accounts")
        rows = database.execute_sql("SELECT id, alias, name, owner_id FROM campaign ORDER BY id").fetchall()
        assert rows == [(*row, None) for row in before]  # Owned by nobody: admins only.
        assert database.execute_sql("SELECT COUNT(*) FROM click").fetchone() == (300,)
        assert database.execute_sql("SELECT COUNT(*) FROM app_user").fetchone() == (0,)
        assert authenticate_api_key(database, install_key) == INSTALL_KEY

        # The upgraded install takes accounts at once.
        add_user(database, "anna", "buyer", PASSWORD)
        assert visible_campaign_ids(database, principal_of(database, "anna")) == set()
        share_campaign(database, "gen-1", "anna", may_edit=True)
        anna = principal_of(database, "anna")
        assert visible_campaign_ids(database, anna) == editable_campaign_ids(database, anna) == {before[1][0]}
        update_campaign(database, "gen-1", name="Renamed", actor=anna)
        actor, entity, old, new = database.execute_sql(
            "SELECT actor, entity, old_values, new_values FROM audit_log WHERE action = 'update'"
        ).fetchone()
        assert (actor, entity, old, new) == (
            "anna",
            "campaign",
            '{"name": "Generated 1"}',
            '{"name": "Renamed"}',
        )
    finally:
        database.close()
