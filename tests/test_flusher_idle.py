"""The idle flusher sleeps until a click is journalled (inotify on the spool), and wakes to stop (issue 33).

Before, an idle flusher looked at the spool every 2 s on every node, and Huey's threads polled Redis:
CPU spent on nothing, spread over the clicks when they come. Its wait now ends at the first append,
so the tests give it an hour-long idle wait: only the wake can land the click or stop it in time.
"""

from __future__ import annotations

import re

from conftest import wait_until

from models.admin.services import create_campaign, create_offer
from models.tables.click import Click
from workers.runtime.spoolwake import SpoolWake
from workers.runtime.tasks import FlusherThread

HOUR = 3600.0
DEADLINE = 60.0  # Generous: a busy box; a missed wake would take the hour.


def journal_click(app_client, alias: str, ip: str) -> str:
    """One visitor's click through the app (journalled to the spool, not landed); its subid."""
    status, headers, _ = app_client.request(
        f"/{alias}", {"X-Real-IP": ip, "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}
    )
    assert status == 302, (status, headers)
    return re.search(r"s=([^&]+)", headers["location"]).group(1)


def landed(subid: str) -> bool:
    return Click.select().where(Click.subid == subid).exists()


def test_an_idle_flusher_lands_a_click_as_soon_as_it_is_journalled_and_stops_at_once(
    db, settings, app_client
):
    offer = create_offer(db, "Offer", "https://o.example/?s={subid}")
    campaign = create_campaign(db, "Demo", "demo", offer_id=offer.id)
    flusher = FlusherThread(settings, lambda delivery_id: None, idle_wait=HOUR)
    flusher.start()
    try:
        for ip in ("203.0.113.10", "203.0.113.11"):  # Twice: the watch is armed again after a landing.
            wait_until(flusher.is_idle.is_set, DEADLINE, "the flusher to wait for clicks")
            subid = journal_click(app_client, campaign.alias, ip)
            wait_until(lambda subid=subid: landed(subid), DEADLINE, f"click {subid} to land")
        wait_until(flusher.is_idle.is_set, DEADLINE, "the flusher to wait again")
    finally:
        flusher.stop(timeout=DEADLINE)
    assert not flusher.is_alive()  # Woken from its hour-long wait by stop().


def test_the_spool_watch_is_there_only_while_armed(tmp_path):
    """Under load the flusher is paced by time and disarmed: no inotify event per appended click."""
    spool = tmp_path / "spool"
    wake = SpoolWake(spool)
    try:
        assert wake.is_available
        assert not wake.wait(0) and not wake.is_armed
        (spool / "before").parent.mkdir()
        (spool / "before").write_bytes(b"x")
        assert not wake.wait(0)  # Not armed: a write goes unseen.
        assert wake.arm() and wake.is_armed
        with (spool / "clicks.00000001.log").open("ab") as segment:
            segment.write(b"a line\n")
        assert wake.wait(HOUR)  # At once: the append.
        assert not wake.wait(0)  # Each event is read once.
        wake.disarm()
        (spool / "clicks.00000001.log").write_bytes(b"another line\n")
        assert not wake.wait(0)
        wake.wake()
        assert wake.wait(HOUR)  # Woken (stop()), not timed out.
    finally:
        wake.close()
