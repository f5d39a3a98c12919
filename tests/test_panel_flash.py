"""The panel's show-once flash (routes/panel/flash.py): sealed to one session and one page, for two
minutes, and refused when tampered with."""

from __future__ import annotations

from models.accounts.principal import user_principal
from models.accounts.sessions import Session
from routes.panel.flash import FLASH_SECONDS, seal, unseal

NOW = 1_800_000_000.0


def session(session_id: str) -> Session:
    return Session(session_id, 1, "csrf", 0, user_principal(1, "anna", "admin", False))


def test_a_flash_opens_only_for_its_session_and_page_until_it_expires():
    mine, theirs = session("a" * 43), session("b" * 43)
    value = seal(mine, "/panel/users/2", {"key": "lnr_secret"}, now=NOW)
    assert "lnr_secret" not in value
    assert unseal(mine, "/panel/users/2", value, now=NOW + FLASH_SECONDS) == {"key": "lnr_secret"}
    assert unseal(theirs, "/panel/users/2", value, now=NOW) is None
    assert unseal(mine, "/panel/users/3", value, now=NOW) is None
    assert unseal(mine, "/panel/users/2", value, now=NOW + FLASH_SECONDS + 1) is None


def test_a_changed_or_garbled_flash_is_none_not_an_error():
    mine = session("a" * 43)
    value = seal(mine, "/panel/users/2", {"key": "lnr_secret"}, now=NOW)
    flipped = value[:30] + ("A" if value[30] != "A" else "B") + value[31:]
    for bad in (flipped, value[:-2], "", "!!!", "x" * 10):
        assert unseal(mine, "/panel/users/2", bad, now=NOW) is None
