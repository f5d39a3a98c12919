"""Many zone costs pasted at once (/panel/campaigns/{id}/costs/paste) in process, on a real migrated
database: the lines read (tabs, commas, printed amounts) or listed as bad with a reason, the preview that
changes nothing and says new, replaces, same or unknown for each zone, the apply that sets every zone in
one transaction (all or none), the same paste twice giving the same costs, bounds on the paste, and who
may paste."""

from __future__ import annotations

import urllib.parse

import pytest
import test_panel
from conftest import request
from test_costs import zone_clicks
from test_panel import FORM, PASSWORD, log_in
from test_panel_editor import token_of

# The panel fixtures of tests/test_panel.py, shared (assigned, not imported: the names are parameters below).
make_panel, panel = test_panel.make_panel, test_panel.panel

PASTE = "/panel/campaigns/1/costs/paste"
WIDE = {"from": "2000-01-01", "to": "2099-12-31"}


def test_lines_are_read_by_tab_semicolon_or_comma_and_bad_ones_say_why():
    from models.reporting.costpaste import parse_paste

    text = "\n".join(
        [
            "zone\tspend",  # A header copied with the column.
            "4417\t12.50",
            "4418, $1,250.50",
            "4419;7,5",
            "",
            "4420\t1 000 USD",
            "4417\t3",
            "4421",
            "\t5",
            "4422\t-5",
            "4423\t1\t2",
        ]
    )
    lines = {line.number: line for line in parse_paste(text)}
    assert 5 not in lines  # Blank lines are no lines.
    assert (lines[2].zone, lines[2].amount, lines[2].status) == ("4417", 12.5, "new")
    assert (lines[3].zone, lines[3].amount) == ("4418", 1250.5)
    assert (lines[4].zone, lines[4].amount) == ("4419", 7.5)
    assert (lines[6].zone, lines[6].amount) == ("4420", 1000.0)
    bad = {n: line.detail for n, line in lines.items() if line.status == "bad"}
    assert set(bad) == {1, 7, 8, 9, 10, 11}
    assert "'spend' is not an amount" in bad[1]
    assert "on line 2 already" in bad[7]
    assert "no tab or comma" in bad[8]
    assert "no zone" in bad[9]
    assert "'-5' is not an amount" in bad[10]
    assert "more than two columns" in bad[11]


def test_a_paste_past_its_line_limit_or_with_no_line_is_refused_whole():
    from models.reporting.costpaste import MAX_LINES, PasteError, parse_paste

    with pytest.raises(PasteError, match=f"at most {MAX_LINES:,} lines, not 100,000"):
        parse_paste("z\t1\n" * 100_000)
    with pytest.raises(PasteError, match="Paste one zone"):
        parse_paste("\n \n")


@pytest.fixture
def zones(db, settings, make_tracker):
    """Campaign 1 `north` of source Propeller (zoneid in sub_id_1): zone 1 has 3 clicks and a bot, zone 2
    one click, zone 3 two; campaign 2 `south` one click in zone 1. Users anna (admin), bert (buyer, north
    shared to edit), vera (viewer), frugal (buyer who sees no money)."""
    from models.accounts.sharing import share_campaign
    from models.accounts.users import add_user

    zone_clicks(
        db,
        settings,
        make_tracker,
        {
            "north": [("1", False)] * 3 + [("1", True), ("2", False), ("3", False), ("3", False)],
            "south": [("1", False)],
        },
    )
    for name, role in (("anna", "admin"), ("bert", "buyer"), ("vera", "viewer"), ("frugal", "buyer")):
        add_user(db, name, role, PASSWORD, hides_money=name == "frugal")
    share_campaign(db, 1, "bert", may_edit=True)
    share_campaign(db, 1, "frugal", may_edit=True)
    share_campaign(db, 1, "vera")


def paste(app, cookie, text: str, action: str = "preview", **fields):
    token = token_of(request(app, PASTE, {"Cookie": cookie})[2].decode())
    body = {"csrf_token": token, "action": action, "parameter": "zoneid", "paste": text, **WIDE, **fields}
    status, _, page = request(
        app, PASTE, {**FORM, "Cookie": cookie}, "POST", urllib.parse.urlencode(body).encode()
    )
    return status, page.decode()


def zone_costs(db) -> dict[tuple[int, str], float]:
    rows = db.execute_sql("SELECT campaign_id, sub_id_1, cost FROM click WHERE is_bot = 0").fetchall()
    costs: dict[tuple[int, str], float] = {}
    for campaign_id, zone, cost in rows:
        costs[(campaign_id, zone)] = round(costs.get((campaign_id, zone), 0.0) + cost, 6)
    return costs


def statuses(page: str) -> dict[str, str]:
    """Zone -> the status the preview table gives it."""
    import re

    rows = re.findall(r'<tr class="paste-([a-z]+)"><td class="n">\d+</td><td>([^<]*)</td>', page)
    return {zone: status for status, zone in rows}


def test_a_preview_sets_nothing_and_apply_sets_each_zone_once_the_same_paste_giving_the_same_costs(
    panel, zones, db
):
    from models.accounts.audit import list_audit

    cookie = log_in(panel)
    before = zone_costs(db)
    text = "1\t30\n2,5.5\n9\t4\nnonsense"
    status, page = paste(panel, cookie, text)
    assert status == 200, page
    assert statuses(page) == {"1": "new", "2": "new", "9": "unknown", "nonsense": "bad"}
    assert "The campaign has no clicks with zoneid=9 in that period" in page
    assert 'id="paste-apply"' in page and "Apply 2 zone costs" in page
    assert zone_costs(db) == before  # A preview changes nothing.

    status, page = paste(panel, cookie, text, "apply")
    assert status == 200, page
    assert "2 zone costs set, 35.50 USD in all, over 4 clicks; 2 lines not set" in page
    after = zone_costs(db)
    assert after[(1, "1")] == 30.0 and after[(1, "2")] == 5.5
    assert after[(1, "3")] == before[(1, "3")] and after[(2, "1")] == before[(2, "1")]  # Not pasted.
    costs = [entry for entry in list_audit(db, entity="campaign", entity_id=1) if entry.action == "cost"]
    assert sorted(entry.new_values["sub_id_1"] for entry in costs) == ["1", "2"]

    status, page = paste(panel, cookie, text)  # Again: the same costs, said so.
    assert statuses(page)["1"] == "same" and statuses(page)["2"] == "same"
    status, page = paste(panel, cookie, text, "apply")
    assert status == 200 and zone_costs(db) == after
    listed = db.execute_sql("SELECT COUNT(*) FROM cost_entry").fetchone()[0]
    assert listed == 2  # The second paste's sets replaced the first's in the list too.

    status, page = paste(panel, cookie, "1\t12")  # Another amount for zone 1 replaces its cost.
    assert statuses(page) == {"1": "replaces"} and "this zone&#39;s 30.00 USD" in page


def test_a_zone_under_a_campaign_wide_cost_replaces_its_share_of_it(panel, zones, db):
    from models.reporting.costs import set_campaign_cost

    set_campaign_cost(db, 1, "2000-01-01", "2099-12-31", 60.0, cost_currency="USD")
    cookie = log_in(panel)
    status, page = paste(panel, cookie, "3\t1")
    assert statuses(page) == {"3": "replaces"} and "its share of the campaign&#39;s 60.00 USD" in page
    paste(panel, cookie, "3\t1", "apply")
    costs = zone_costs(db)
    assert costs[(1, "3")] == 1.0
    assert costs[(1, "1")] + costs[(1, "2")] == pytest.approx(60.0 * 4 / 6)  # The others keep theirs.


def test_a_paste_is_set_whole_or_not_at_all(zones, db):
    from models.reporting.costpaste import apply_paste, plan_paste
    from models.reporting.costs import CostError
    from models.tables.campaign import Campaign

    before = zone_costs(db)
    plan = plan_paste(db, Campaign.get_by_id(1), "1\t10\n3\t20", "zoneid", WIDE["from"], WIDE["to"])
    assert [line.status for line in plan.lines] == ["new", "new"]
    # Zone 3's clicks go between the preview and the apply (raw retention): zone 1 is not set either.
    db.execute_sql("DELETE FROM click WHERE sub_id_1 = '3'")
    with pytest.raises(CostError, match="zoneid=3"):
        apply_paste(db, plan)
    after = zone_costs(db)
    assert after[(1, "1")] == before[(1, "1")]
    assert db.execute_sql("SELECT COUNT(*) FROM cost_entry").fetchone()[0] == 0


def test_a_file_upload_is_read_as_the_paste(panel, zones, db):
    cookie = log_in(panel)
    token = token_of(request(panel, PASTE, {"Cookie": cookie})[2].decode())
    boundary = "lannerboundary"
    parts = [("csrf_token", token), ("action", "apply"), ("parameter", "zoneid"), *WIDE.items()]
    body = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in parts
    )
    body += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="zones.csv"\r\n'
        f"Content-Type: text/csv\r\n\r\n\ufeff2,8\r\n3,9\r\n--{boundary}--\r\n"
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Cookie": cookie}
    status, _, page = request(panel, PASTE, headers, "POST", body.encode())
    assert status == 200, page
    assert zone_costs(db)[(1, "2")] == 8.0 and zone_costs(db)[(1, "3")] == 9.0


def test_huge_pastes_wrong_fields_and_no_right_to_costs_get_a_clear_4xx(panel, zones, db):
    cookie = log_in(panel)
    token = token_of(request(panel, PASTE, {"Cookie": cookie})[2].decode())
    huge = urllib.parse.urlencode({"csrf_token": token, "paste": "4417\t12.50\n" * 100_000}).encode()
    status, _, page = request(panel, PASTE, {**FORM, "Cookie": cookie}, "POST", huge)
    assert status == 413 and b"at most 256 KB" in page
    status, page = paste(panel, cookie, "z\n" * 2001)
    assert status == 400 and "at most 2,000 lines, not 2,001" in page
    status, page = paste(panel, cookie, "1\t5", parameter="nosuch")
    assert status == 400 and "&#39;nosuch&#39; is neither sub_id_1" in page
    status, page = paste(panel, cookie, "1\t5", to="1999-01-01")
    assert status == 400 and "The period ends before it starts." in page
    status, page = paste(panel, cookie, "9\t5", "apply")
    assert status == 400 and "No line of the paste can be set" in page
    assert db.execute_sql("SELECT COUNT(*) FROM cost_entry").fetchone()[0] == 0

    bert = log_in(panel, "bert")
    assert paste(panel, bert, "1\t5", "apply")[0] == 200  # Shared to edit: pastes.
    assert request(panel, "/panel/campaigns/2/costs/paste", {"Cookie": bert})[0] == 404  # Not shared.
    for name in ("vera", "frugal"):  # A viewer may not set costs; frugal sees no amounts.
        assert request(panel, PASTE, {"Cookie": log_in(panel, name)})[0] == 403
    vera = log_in(panel, "vera")
    body = urllib.parse.urlencode(
        {"csrf_token": token_of(request(panel, "/panel", {"Cookie": vera})[2].decode())}
    )
    assert request(panel, PASTE, {**FORM, "Cookie": vera}, "POST", (body + "&paste=1%095").encode())[0] == 403


def test_a_preview_reads_only_the_pasted_zones_and_counts_what_a_cost_set_per_zone_would(db):
    """The preview's one scan returns only the pasted zones' clicks (a busy campaign's week holds
    thousands of zones); each line's clicks and cost are what setting that zone alone would use."""
    from models.admin.rows import get_campaign
    from models.reporting.costpaste import plan_paste, zone_clicks
    from models.reporting.costs import check_clicks, cost_request, cost_scope
    from models.store.costs import CostStore
    from workers.bench.generate import generate_clicks

    generate_clicks(db, 2_000, 2, campaigns=1, seed=29, zone_count=300)
    campaign = get_campaign(db, 1)
    pasted = ["1000", "1001", "1002", "1150", "1299", "nowhere"]
    text = "\n".join(f"{zone}\t{n + 1.25}" for n, zone in enumerate(pasted)) + "\n1003\t-1"
    plan = plan_paste(db, campaign, text, "sub_id_1", "2000-01-01", "2099-12-31", include_bots=True)
    request = plan.lines[0].request
    assert request is not None
    every = CostStore(db.connection()).scope_clicks_by(1, request.start_ms, request.end_ms, "sub_id_1")
    assert len(every) > 250 and {"1000", "1299"} <= set(every)
    assert zone_clicks(db, request, pasted) == {zone: every[zone] for zone in pasted if zone in every}
    assert zone_clicks(db, request, []) == {}
    for line, zone in zip(plan.lines, pasted, strict=False):
        alone = cost_request(
            db,
            cost_scope(db, campaign=campaign, sub_ids=[("sub_id_1", zone)]),
            "2000-01-01",
            "2099-12-31",
            line.amount or 0.0,
            include_bots=True,
        )
        if zone == "nowhere":
            assert line.status == "unknown" and line.request is None
            continue
        assert line.status == "new" and line.request == alone, zone
        assert line.clicks == check_clicks(db, alone) == len(every[zone]) > 0, zone
    assert plan.lines[-1].status == "bad" and "amount" in plan.lines[-1].detail
