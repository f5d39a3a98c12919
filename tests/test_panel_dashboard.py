"""The dashboard's options in process, on a real migrated database: the chart's metrics chosen in the URL
(amounts never for a hide-money user), a custom range charted by the hour or the day and counting what
the report counts, the opt-in auto-refresh carried by the page's links and its htmx poll, a poll after
the session ended sent to the login page, and bad options answered 400."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import test_panel
from conftest import request
from test_panel import chart_of, get, log_in

# The panel fixtures of tests/test_panel.py, shared (assigned, not imported: the names are parameters below).
make_panel, panel, users, clicks = (
    test_panel.make_panel,
    test_panel.panel,
    test_panel.users,
    test_panel.clicks,
)


def test_the_chart_draws_the_metrics_the_url_names_and_never_amounts_for_a_hide_money_user(
    panel, users, clicks
):
    cookie = log_in(panel)
    assert chart_of(get(panel, "/panel", cookie)[2])["metrics"] == [
        "clicks",
        "conversions",
        "revenue",
        "cost",
        "profit",
    ]
    html = get(panel, "/panel?period=last_7_days&chart=profit&chart=unique_clicks", cookie)[2]
    chart = chart_of(html)
    assert chart["metrics"] == ["profit", "unique_clicks"] and set(chart["series"]) == set(chart["metrics"])
    assert chart["labels"] == {"profit": "Profit", "unique_clicks": "Unique clicks"}
    assert 0 < sum(chart["series"]["unique_clicks"]) <= 250
    assert 'id="chart-profit" checked' in html and 'id="chart-clicks" checked' not in html
    # The period links keep the chart chosen.
    assert 'href="?period=today&amp;chart=profit%2Cunique_clicks"' in html

    frugal = log_in(panel, "frugal")
    assert chart_of(get(panel, "/panel", frugal)[2])["metrics"] == ["clicks", "conversions"]
    status, _, body = request(panel, "/panel?chart=clicks,profit", {"Cookie": frugal})
    assert (
        status == 400 and b"The chart draws clicks, unique_clicks, conversions, not &#39;profit&#39;" in body
    )
    assert b'id="chart-profit"' not in get(panel, "/panel", frugal)[2].encode()


def test_a_custom_range_counts_its_days_by_the_hour_or_the_day(panel, users, clicks):
    cookie = log_in(panel)
    today = datetime.now(UTC).date()
    week = get(panel, "/panel?period=last_7_days", cookie)[2]
    html = get(panel, f"/panel?from={today - timedelta(days=6)}&to={today}", cookie)[2]
    chart = chart_of(html)
    assert len(chart["x"]) == 7 and chart["series"] == chart_of(week)["series"]  # Days, as the week's.
    assert f'value="{today - timedelta(days=6)}"' in html and 'aria-current="true"' not in html
    two_days = chart_of(
        get(panel, f"/panel?period=custom&from={today - timedelta(days=1)}&to={today}", cookie)[2]
    )
    assert len(two_days["x"]) == 48 and sum(two_days["series"]["clicks"]) == 250  # Hours; every click.
    for query, says in (
        ("period=custom", b"A custom period needs a from date."),
        ("from=yesterday", b"yesterday"),
        (f"from={today}&to={today - timedelta(days=3)}", b""),
        ("period=forever", b"Unknown period"),
    ):
        status, _, body = request(panel, f"/panel?{query}", {"Cookie": cookie})
        assert status == 400 and says in body, (query, body[-600:])


def test_auto_refresh_is_opt_in_and_a_poll_after_the_session_ended_goes_to_the_login(panel, users, clicks):
    cookie = log_in(panel)
    html = get(panel, "/panel", cookie)[2]
    assert 'id="dashboard" hx-get="/panel?period=today" hx-trigger="none"' in html  # Off unless chosen.
    assert 'id="refresh" hx-get="/panel?period=today"' in html
    html = get(panel, "/panel?period=last_7_days&refresh=60", cookie)[2]
    assert 'hx-get="/panel?period=last_7_days&amp;refresh=60" hx-trigger="every 60s"' in html
    assert 'href="?period=yesterday&amp;refresh=60"' in html and "again every 1 min" in html
    status, _, body = request(panel, "/panel?refresh=1", {"Cookie": cookie})
    assert status == 400 and b"Auto-refresh is every 10, 30, 60, 300 seconds, or off." in body
    # A poll: answered as the page (htmx takes its #dashboard); once the session is gone, a redirect.
    status, _, body = request(panel, "/panel?refresh=60", {"Cookie": cookie, "HX-Request": "true"})
    assert status == 200 and b'id="dashboard"' in body
    status, headers, body = request(panel, "/panel?refresh=60", {"HX-Request": "true"})
    assert status == 204 and headers["hx-redirect"] == "/panel/login?next=%2Fpanel%3Frefresh%3D60"
    assert request(panel, "/panel", {})[0] == 303  # Without htmx: the login page's redirect, as before.
