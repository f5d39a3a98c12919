"""The campaign list sorted by any column, by two keys (a header click makes its column the first key),
rows without a value last, and its CSV: exactly the rows, order, columns and totals the page shows.
In process, on generated clicks over three campaigns and two without any."""

# ruff: noqa: F811  (test_panel's fixtures, imported, are redefined by each test's arguments)
from __future__ import annotations

import csv
import html as htmllib
import io
import re

import pytest
from conftest import request
from test_panel import get, log_in, make_panel, own, panel, users  # noqa: F401


@pytest.fixture
def listed(db):
    """Campaigns gen-0, gen-1, gen-2 with clicks (and sales on some), Zeta and Alpha with none."""
    from test_panel_logs import imported, stored_subids

    from models.admin.services import create_campaign
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 300, 1, campaigns=3, seed=8) == 300
    imported(db, stored_subids(db, 1)[:9] + stored_subids(db, 3)[:2])
    create_campaign(db, "Zeta", "zeta", offer_url="https://o.example/")
    create_campaign(db, "alpha", "alpha", offer_url="https://o.example/")


def rows_of(html: str) -> list[tuple[str, int, str]]:
    """(name, clicks, CR) of each row, in order."""
    names = [
        htmllib.unescape(n)
        for n in re.findall(r'<td class="name"><a href="/panel/campaigns/\d+">([^<]*)</a>', html)
    ]
    clicks = [
        int(c.replace(",", "")) for c in re.findall(r'<td class="n" data-label="Clicks">([0-9,]+)</td>', html)
    ]
    crs = re.findall(r'<td class="n" data-label="CR">([^<]*)</td>', html)
    return list(zip(names, clicks[: len(names)], crs[: len(names)], strict=True))


def sort_link(html: str, column: str) -> str:
    return htmllib.unescape(
        re.search(rf'<a href="\?([^"]*)" class="sort" data-sort="{column}">', html).group(1)
    )


def test_the_list_sorts_by_two_keys_with_rows_without_a_value_last(panel, users, listed):
    admin = log_in(panel)
    status, _, html = get(panel, "/panel/campaigns?period=today", admin)
    assert status == 200
    unsorted = rows_of(html)
    assert [name for name, _, _ in unsorted] == ["Generated 0", "Generated 1", "Generated 2", "Zeta", "alpha"]
    # A click on Clicks: most clicks first; the campaigns without clicks tie, and keep their order.
    link = sort_link(html, "clicks")
    assert link == "period=today&status=current&sort=-clicks"
    html = get(panel, f"/panel/campaigns?{link}", admin)[2]
    by_clicks = rows_of(html)
    assert [c for _, c, _ in by_clicks] == sorted((c for _, c, _ in unsorted), reverse=True)
    assert [n for n, _, _ in by_clicks][-2:] == ["Zeta", "alpha"]
    assert 'aria-sort="descending"' in html and 'title="sort key 1">▼</span>' in html
    # Then a click on Campaign: by name first (case-blind), clicks second; its header turns it round.
    link = sort_link(html, "name")
    assert link.endswith("sort=name,-clicks")
    html = get(panel, f"/panel/campaigns?{link}", admin)[2]
    assert [n for n, _, _ in rows_of(html)] == ["alpha", "Generated 0", "Generated 1", "Generated 2", "Zeta"]
    assert sort_link(html, "name").endswith("sort=-name,-clicks")
    assert 'title="sort key 2">▼2</span>' in html
    # Two keys: equal clicks (none) ordered by the second key.
    html = get(panel, "/panel/campaigns?sort=clicks,-name", admin)[2]
    assert [n for n, _, _ in rows_of(html)][:2] == ["Zeta", "alpha"]
    # No CR without clicks: last, whichever the direction.
    for sort in ("cr", "-cr"):
        crs = [cr for _, _, cr in rows_of(get(panel, f"/panel/campaigns?sort={sort}", admin)[2])]
        shown = [float(cr.rstrip("%")) for cr in crs[:3]]
        assert shown == sorted(shown, reverse=sort.startswith("-")) and crs[3:] == ["–", "–"], sort
    # The period links and the filter form keep the sort.
    html = get(panel, "/panel/campaigns?sort=-cr&q=gen", admin)[2]
    assert 'href="?period=yesterday&amp;status=current&amp;q=gen&amp;sort=-cr"' in html
    assert '<input type="hidden" name="sort" value="-cr">' in html


def test_a_sort_the_list_cannot_have_is_a_400(panel, users, listed, db):
    admin = log_in(panel)
    for sort in ("bogus", "clicks,name,cr", "clicks,-clicks", "-"):
        status, _, html = get(panel, f"/panel/campaigns?sort={sort}", admin)
        assert status == 400 and "Sort by" in html, sort
    own(db, 1, users["frugal"])
    frugal = log_in(panel, "frugal")
    assert get(panel, "/panel/campaigns?sort=-revenue", frugal)[0] == 400  # Not a column they are shown.
    html = get(panel, "/panel/campaigns?sort=-clicks", frugal)[2]
    assert 'data-sort="revenue"' not in html and 'data-sort="cr"' in html


def read_csv(panel, cookie, query: str) -> list[list[str]]:
    status, headers, body = request(panel, f"/panel/campaigns.csv?{query}", {"Cookie": cookie})
    assert status == 200 and headers["content-type"] == "text/csv; charset=utf-8", body
    return list(csv.reader(io.StringIO(body.decode())))


def test_the_csv_is_the_list_as_shown_its_filters_sort_and_totals(panel, users, listed, db):
    admin = log_in(panel)
    query = "period=last_7_days&status=current&q=gen&sort=-conversions,name"
    html = get(panel, f"/panel/campaigns?{query}", admin)[2]
    assert f'href="/panel/campaigns.csv?{query.replace("&", "&amp;")}"' in html
    rows = read_csv(panel, admin, query)
    assert rows[0][:8] == ["Campaign", "Alias", "Status", "Tags", "Clicks", "Unique", "Conv.", "CR"]
    assert rows[0][8:] == ["Revenue", "Cost", "Profit", "ROI", "URL"]
    shown = rows_of(html)
    assert [(row[0], int(row[4])) for row in rows[1:-1]] == [(name, clicks) for name, clicks, _ in shown]
    assert [row[7] for row in rows[1:-1]] == [cr.rstrip("%") for _, _, cr in shown]
    assert [int(row[6]) for row in rows[1:-1]] == [9, 2, 0]
    assert rows[1][12] == "http://127.0.0.1/gen-0"
    total = rows[-1]
    assert total[:4] == ["Total", "", "", ""] and int(total[4]) == 300 and int(total[6]) == 11
    # A user who hides money: no amounts; only their campaigns.
    own(db, 2, users["frugal"])
    rows = read_csv(panel, log_in(panel, "frugal"), "sort=name")
    assert rows[0] == ["Campaign", "Alias", "Status", "Tags", "Clicks", "Unique", "Conv.", "CR", "URL"]
    assert [row[0] for row in rows[1:]] == ["Generated 1", "Total"]
