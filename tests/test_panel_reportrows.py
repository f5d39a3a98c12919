"""The report builder's rows (routes/panel/reportrows.py) are the bytes the template's row loop
rendered before it moved to Python: that loop is kept here verbatim (OLD_LOOP, with the `cell` it
called) and both render the same rows (hostile names, every number format, ticked, charted and
labelled rows) of real levels of each backend's database and of made-up rows."""

from __future__ import annotations

import math
import urllib.parse
from types import SimpleNamespace

import pytest
from test_panel import clicks, log_in, make_panel, own, panel, users  # noqa: F401 (fixtures)
from test_panel_reports import WEEK, ok, set_sub_id

# ruff: noqa: F811, E501 (the fixtures imported above, taken as arguments; OLD_LOOP's template lines verbatim)

OLD_LOOP = (
    "  {% for row in rows %}\n"
    '    <tr{% if row.value in ticked %} class="ticked"{% endif %}>\n'
    '      <td class="name">{% if can_chart_rows and row.value is not none %}<input type="checkbox" name="row" value="{{ row.value }}" form="series-form" class="chart-row" aria-label="Chart {{ row.label }}"{% if row.value in state.selected %} checked{% endif %}> {% endif %}{% if row.value is not none %}<input type="checkbox" name="without" value="{{ row.value }}" form="subtract-form" class="subtract-row" title="Leave out of the total" aria-label="Leave {{ row.label }} out of the total"{% if row.value in ticked %} checked{% endif %}> {% endif %}{% if labelling and labelling.can_write and row.value %}<input type="checkbox" name="values" value="{{ row.value }}" form="label-form" aria-label="Tick {{ row.label }}"> {% endif %}{% if not is_last and row.value is not none %}<a class="drill-down" href="{{ state.url(drill=state.drill + (row.value,)) }}">{{ row.label }}</a>{% else %}{{ row.label }}{% endif %}{% if row.sub %} <small>{{ row.sub }}</small>{% endif %}{% if shows_gaps and row.stats.get("unconverted") %} <small class="rate-gap">{{ row.stats.unconverted_note }}</small>{% endif %}{% if shows_gaps and row.stats.get("uncosted") %} <small class="rate-gap">{{ row.stats.uncosted_note }}</small>{% endif %}</td>\n'
    '      {% for name in state.columns %}<td class="n">{{ cell(name, row.stats[name], currency) }}</td>{% endfor %}\n'
    "      {% if labelling %}<td class=\"label {{ labelling.labels.get(row.value, '') }}\">{{ labelling.labels.get(row.value, '') }}</td>{% endif %}\n"
    "    </tr>\n"
    "  {% endfor %}\n"
)

SCRIPT = '<script>alert("x")</script>'
QUOTES = "a & b 'q' \"dq\" \u00fcn\u00efc\u00f8d\u00e9 \u2713 <i>"


def old_rows(context: dict) -> str:
    from routes.panel.render import create_environment
    from routes.panel.reports import cell

    return create_environment().from_string(OLD_LOOP).render({**context, "cell": cell})


def new_rows(context: dict) -> str:
    from routes.panel.reportrows import table_rows
    from routes.panel.reports import AMOUNTS, PERCENT_METRICS, drill_parts

    html = table_rows(
        context["rows"],
        columns=context["state"].columns,
        selected=context["state"].selected,
        drill=drill_parts(context["state"]),
        currency=context["currency"],
        percents=PERCENT_METRICS,
        amounts=AMOUNTS,
        ticked=context["ticked"],
        labelling=context["labelling"],
        can_chart_rows=context["can_chart_rows"],
        is_last=context["is_last"],
        shows_gaps=context["shows_gaps"],
    )
    return str(html) + "\n"  # The template's line after it.


@pytest.fixture
def captured(monkeypatch):
    """The context of each panel page rendered."""
    from routes.panel.render import Renderer

    pages: list[dict] = []
    render = Renderer.__call__

    def capture(self, resp, template, code=200, **context):
        pages.append(context)
        render(self, resp, template, code, **context)

    monkeypatch.setattr(Renderer, "__call__", capture)
    return pages


def test_a_level_s_rows_are_the_old_loop_s_bytes_on_each_backend(panel, users, clicks, db, captured):
    from models.admin.services import update_campaign

    set_sub_id(db, 1, SCRIPT, every=3)
    set_sub_id(db, 1, QUOTES, every=5)
    set_sub_id(db, 1, "", every=7)
    update_campaign(db, 1, name='<b>bold</b> & "x"')
    own(db, 1, users["frugal"])
    admin, frugal = log_in(panel), log_in(panel, "frugal")
    q = urllib.parse.quote
    money = "".join(
        f"&col={c}" for c in ("clicks", "revenue", "cr", "roi", "epc", "cost", "profit", "lp_ctr")
    )
    paths = [
        (admin, WEEK + "&g1=sub_id_1&g2=campaign"),
        (admin, WEEK + "&g1=sub_id_1&g2=campaign" + money + "&sort=epc&order=asc"),
        (admin, f"{WEEK}&g1=sub_id_1&g2=campaign&f.campaign=1&without={q(SCRIPT)}&without=&row={q(QUOTES)}"),
        (admin, WEEK + "&g1=campaign&g2=sub_id_1&d1=1"),  # The last level: no drill links.
        (admin, WEEK + "&g1=offer&g2=country"),  # (none) rows drilling into 0.
        (frugal, WEEK + "&g1=sub_id_1&g2=campaign"),  # Hides money.
        (admin, WEEK + "&g1=hour&g2=sub_id_1&col=clicks&col=cost&col=cr"),  # A time level.
    ]
    for cookie, path in paths:
        html = ok(panel, path, cookie)
        context = captured[-1]
        assert context["rows"], path
        rows = new_rows(context)
        assert rows == old_rows(context), path
        assert rows in html
    html = ok(panel, paths[0][1], admin)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html and SCRIPT not in html


def test_made_up_rows_format_and_escape_as_the_old_loop():
    from routes.panel.reports import PERCENT_METRICS, REPORT_METRICS, parse_state

    state, _ = parse_state(
        "g1=sub_id_2&g2=sub_id_1&g3=country&d1=%3Cx%3E%26&f.os=a%26b,%22c%22"
        + "".join(f"&col={m}" for m in REPORT_METRICS)
        + "&sort=roi&sort2=clicks&order2=asc&row=7&row=%3Cb%3E",
        SimpleNamespace(hides_money=False),
    )
    numbers = [
        0,
        7,
        -999,
        1000,
        -1234567,
        12345678901,
        None,
        0.0,
        0.5,
        1.5,
        2.5,
        -0.005,
        999.995,
        1234.5678,
        -98765.4321,
        1e15,
        True,
        math.nan,
        math.inf,
        -math.inf,
    ]
    values = [None, "0", "", "7", "<b>", SCRIPT, QUOTES, "a b+c/d?e=f&g", "%41", "x" * 300]
    rows = []
    for n, value in enumerate(values * 4):
        stats = {}
        for k, metric in enumerate(REPORT_METRICS):
            number = numbers[(n + k) % len(numbers)]
            is_infinite = isinstance(number, float) and not math.isfinite(number)
            is_count = metric not in PERCENT_METRICS and metric not in (
                "revenue",
                "cost",
                "profit",
                "epc",
                "cpc",
                "cpa",
                "revenue_pending",
            )
            stats[metric] = None if is_infinite and is_count else number  # A count is never NaN or infinite.
        stats |= {
            "unconverted": n % 3,
            "unconverted_note": f"{n} <sales> & co",
            "uncosted": n % 2,
            "uncosted_note": QUOTES,
        }
        label = "(none)" if value is None else value
        rows.append(
            {
                "label": label + ("" if n % 2 else " <&>"),
                "sub": SCRIPT if n % 5 == 0 else "",
                "value": value,
                "stats": stats,
            }
        )
    for currency in ("USD", "", '<&"€>'):
        for labels, can_write in (
            (None, False),
            ({"<b>": "blacklist", SCRIPT: '"><x>'}, True),
            ({"0": "w"}, False),
        ):
            column = None if labels is None else SimpleNamespace(labels=labels, can_write=can_write)
            for is_last, can_chart in ((False, True), (True, False)):
                context = {
                    "rows": rows,
                    "state": state,
                    "currency": currency,
                    "ticked": {"<b>", "", "0", QUOTES},
                    "labelling": column,
                    "can_chart_rows": can_chart,
                    "is_last": is_last,
                    "shows_gaps": currency != "",
                }
                assert new_rows(context) == old_rows(context)
