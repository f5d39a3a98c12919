"""Column sets as the service keeps them, on both backends: saved per user and page, replaced by name,
one default a page, another user's not there, money columns refused to (and hidden from) a user who
hides money; the report builder's remembered grouping; and the summary row less ticked rows."""

from __future__ import annotations

import pytest

from models.reporting.columnpages import CAMPAIGNS, REPORTS
from models.reporting.columnsets import (
    ColumnSetError,
    ColumnSetNotFound,
    default_set,
    delete_set,
    get_set,
    list_sets,
    make_default,
    remember_groups,
    remembered_groups,
    save_set,
)
from models.reporting.summary import total_of, total_without


@pytest.fixture
def two_users(db):
    from models.accounts.users import add_user

    anna = add_user(db, "anna", "buyer", "correct horse battery")
    bert = add_user(db, "bert", "buyer", "correct horse battery")
    return anna.id, bert.id


def test_a_set_is_saved_per_user_and_page_and_one_is_the_default(db, two_users):
    anna, bert = two_users
    first = save_set(
        db,
        anna,
        REPORTS,
        " My  money ",
        ["profit", "clicks", "roi"],
        hides_money=False,
        sort="-profit,clicks",
        groups=("campaign", "offer"),
    )
    assert (first.name, first.columns, first.sort, first.groups) == (
        "My money",
        ("profit", "clicks", "roi"),
        "-profit,clicks",
        ("campaign", "offer"),
    )
    assert default_set(db, anna, REPORTS, False) is None
    second = save_set(db, anna, REPORTS, "Reach", ["clicks", "bots"], hides_money=False, is_default=True)
    assert default_set(db, anna, REPORTS, False).name == "Reach"
    # The same name again replaces it (and keeps it the default); a new default ends the old one.
    again = save_set(db, anna, REPORTS, "Reach", ["bots", "clicks"], hides_money=False)
    assert again.ref == second.ref and again.columns == ("bots", "clicks") and again.is_default
    make_default(db, anna, REPORTS, first.id)
    assert default_set(db, anna, REPORTS, False).name == "My money"
    make_default(db, anna, REPORTS, None)
    assert default_set(db, anna, REPORTS, False) is None
    # The presets first, then the saved ones by name; another page and another user see none of them.
    names = [s.name for s in list_sets(db, anna, REPORTS, False)]
    assert names == ["Traffic", "Money", "Landers", "My money", "Reach"]
    assert [s.name for s in list_sets(db, anna, CAMPAIGNS, False) if not s.is_preset] == []
    assert [s.name for s in list_sets(db, bert, REPORTS, False) if not s.is_preset] == []
    for user, page, ref in (
        (bert, REPORTS, first.ref),
        (anna, CAMPAIGNS, first.ref),
        (anna, REPORTS, "99999"),
        (anna, REPORTS, "preset:nope"),
        (anna, REPORTS, "1e3"),
    ):
        with pytest.raises(ColumnSetNotFound):
            get_set(db, user, page, ref, False)
    with pytest.raises(ColumnSetNotFound):
        make_default(db, bert, REPORTS, first.id)
    with pytest.raises(ColumnSetNotFound):
        delete_set(db, bert, REPORTS, first.id)
    assert get_set(db, anna, REPORTS, "preset:MONEY", False).columns[:3] == ("clicks", "conversions", "cr")
    delete_set(db, anna, REPORTS, first.id)
    assert [s.name for s in list_sets(db, anna, REPORTS, False) if not s.is_preset] == ["Reach"]


def test_bad_sets_are_refused_in_one_sentence(db, two_users):
    anna, _ = two_users
    cases = [
        (dict(name="x", columns=["clicks", "planet"]), "'planet' is no column here"),
        (dict(name="x", columns=[]), "Choose at least one column."),
        (dict(name="", columns=["clicks"]), "Give the set a name."),
        (dict(name="x" * 61, columns=["clicks"]), "at most 60 characters"),
        (dict(name="money", columns=["clicks"]), "built-in set's name"),
        (dict(name="x", columns=["clicks"], sort="-cost"), "Sort by up to 2 of group, clicks"),
        (dict(name="x", columns=["clicks", "cr"], sort="clicks,cr,group"), "Sort by up to 2"),
        (dict(name="x", columns=["clicks"], sort="clicks,-clicks"), "Sort by up to 2"),
    ]
    for given, message in cases:
        with pytest.raises(ColumnSetError, match=message):
            save_set(db, anna, REPORTS, hides_money=False, **given)
    with pytest.raises(ColumnSetError, match="keeps no grouping"):
        save_set(db, anna, CAMPAIGNS, "x", ["clicks"], hides_money=False, groups=("offer",))
    # Money: refused to a user who hides it; a set saved before shows none of it.
    with pytest.raises(ColumnSetError, match="'revenue' is no column here"):
        save_set(db, anna, CAMPAIGNS, "x", ["clicks", "revenue"], hides_money=True)
    saved = save_set(
        db,
        anna,
        CAMPAIGNS,
        "Mixed",
        ["status", "revenue", "clicks", "roi", "epc"],
        hides_money=False,
        sort="-roi,clicks",
    )
    hidden = get_set(db, anna, CAMPAIGNS, saved.ref, True)
    assert hidden.columns == ("status", "clicks") and hidden.sort == "clicks"
    assert all(not set(s.columns) & CAMPAIGNS.money for s in list_sets(db, anna, CAMPAIGNS, True))


def test_the_report_builder_remembers_the_last_grouping_per_user(db, two_users):
    anna, bert = two_users
    assert remembered_groups(db, anna) == ()
    remember_groups(db, anna, ("offer", "country"))
    remember_groups(db, anna, ("offer", "country"))
    assert remembered_groups(db, anna) == ("offer", "country") and remembered_groups(db, bert) == ()
    remember_groups(db, anna, ("day",))
    assert remembered_groups(db, anna) == ("day",)


def test_the_summary_less_ticked_rows_is_the_rest_s_sums_and_their_ratios(db):
    from models.reporting.reports import REPORT_METRICS, ReportQuery, run_report
    from workers.bench.generate import generate_clicks

    assert generate_clicks(db, 200, 1, campaigns=4, seed=5) == 200
    report = run_report(db, ReportQuery(group_by=("campaign",)))
    assert len(report.rows) == 4
    ticked, kept = report.rows[:2], report.rows[2:]
    less = total_without(report.total, ticked)
    assert less == pytest.approx(total_of(kept))
    assert less["clicks"] == sum(row["clicks"] for row in kept)
    assert less["cr"] == pytest.approx(less["conversions"] / less["clicks"] * 100)
    assert total_without(report.total, []) == pytest.approx(
        {name: report.total[name] for name in REPORT_METRICS}
    )
    assert total_without(report.total, report.rows)["cr"] is None


def test_each_list_s_columns_are_the_ones_its_page_chooses_from():
    from models.reporting.columnpages import LANDERS_PAGE, NETWORKS, OFFERS, SOURCES
    from routes.panel.landers import LANDER_TABLE
    from routes.panel.networks import NETWORK_TABLE
    from routes.panel.offers import OFFER_TABLE
    from routes.panel.sources import SOURCE_TABLE

    for page, table in (
        (OFFERS, OFFER_TABLE),
        (SOURCES, SOURCE_TABLE),
        (NETWORKS, NETWORK_TABLE),
        (LANDERS_PAGE, LANDER_TABLE),
    ):
        keys = [column.key for column in table.columns if not column.is_csv_only]
        assert (page.first, *page.columns) == (keys[0], *keys[1:]) and page.defaults == page.columns, (
            page.name
        )
        money = {column.key for column in table.columns if column.is_money and not column.is_csv_only}
        assert page.money & set(page.columns) == money, page.name
        for preset in page.presets:
            assert set(preset.columns) <= set(page.columns) and preset.columns, (page.name, preset.name)
