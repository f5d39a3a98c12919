"""The report builder's table rows as HTML, built in Python: the bytes the row loop of reports.html
rendered before, at a fraction of the cost (a 1,000-row level spent most of its render in that loop:
a drill URL urlencoded per row, a Jinja call and a filter per cell, escaping of what cannot need it).

What is the same for every row is made once a page: the drill URL up to the row's value and after it,
each column's formatter, the currency's escaped suffix. Every text a visitor or a user controls (a
row's value, label and small print, a label) still goes through markupsafe's escape, the function
Jinja's autoescape calls; only the number digits and URL-quoted values, which hold nothing to escape,
are joined as they are.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from routes.panel.labels import LabelColumn

DASH = "–"  # What render.py's filters show for no value.


def whole_text(value) -> str:
    """render.py's `whole`, with the plain int's fast path."""
    if type(value) is int:
        return str(value) if -1000 < value < 1000 else f"{value:,}"
    if value is None:
        return DASH
    return f"{round(value):,}"


def formatter(metric: str, currency: str, percents: frozenset[str], amounts: frozenset[str]) -> Callable:
    """A column's cell text as routes/panel/reports.py's `cell` makes it, escaped: a function of the value."""
    if metric in percents:

        def percent_text(value) -> str:
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                return DASH
            return f"{value:,.1f}%"

        return percent_text
    if metric in amounts:
        # money()'s strip() only ever trims the space before an empty currency.
        suffix = str(escape(f" {currency}".rstrip()))

        def money_text(value) -> str:
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                return DASH
            return f"{value:,.2f}{suffix}"

        return money_text
    return whole_text


def table_rows(
    rows: Iterable[dict[str, Any]],
    *,
    columns: Sequence[str],
    selected: Iterable[str],
    drill: tuple[str, str],
    currency: str,
    percents: frozenset[str],
    amounts: frozenset[str],
    ticked: set[str],
    labelling: LabelColumn | None,
    can_chart_rows: bool,
    is_last: bool,
    shows_gaps: bool,
) -> Markup:
    """The <tr> of each row of the level's table, as reports.html's loop rendered them; `drill` is the
    escaped drill URL around a row's value (reports.py drill_parts)."""
    formats = [(name, formatter(name, currency, percents, amounts)) for name in columns]
    before, after = drill
    quote = urllib.parse.quote_plus
    selected = set(selected)
    can_label = bool(labelling and labelling.can_write)
    labels = labelling.labels if labelling else {}
    out: list[str] = []
    add = out.append
    for row in rows:
        value = row["value"]
        label = str(escape(row["label"]))
        stats = row["stats"]
        add('    <tr class="ticked">\n' if value in ticked else "    <tr>\n")
        add('      <td class="name">')
        if value is not None:
            shown = str(escape(value))
            if can_chart_rows:
                add(
                    f'<input type="checkbox" name="row" value="{shown}" form="series-form" class="chart-row" '
                    f'aria-label="Chart {label}"{" checked" if value in selected else ""}> '
                )
            add(
                f'<input type="checkbox" name="without" value="{shown}" form="subtract-form" '
                f'class="subtract-row" title="Leave out of the total" aria-label="Leave {label} out of the '
                f'total"{" checked" if value in ticked else ""}> '
            )
            if can_label and value:
                add(
                    f'<input type="checkbox" name="values" value="{shown}" form="label-form" '
                    f'aria-label="Tick {label}"> '
                )
        if not is_last and value is not None:
            # quote_plus leaves only letters, digits, _.-~+% : nothing to escape.
            add(f'<a class="drill-down" href="{before}{quote(value)}{after}">{label}</a>')
        else:
            add(label)
        if row["sub"]:
            add(f" <small>{escape(row['sub'])}</small>")
        if shows_gaps and stats.get("unconverted"):
            add(f' <small class="rate-gap">{escape(stats["unconverted_note"])}</small>')
        if shows_gaps and stats.get("uncosted"):
            add(f' <small class="rate-gap">{escape(stats["uncosted_note"])}</small>')
        add("</td>\n")
        add("".join([f'<td class="n">{text(stats[name])}</td>' for name, text in formats]))
        if labelling:
            mark = escape(labels.get(value, ""))
            add(f'<td class="label {mark}">{mark}</td>')
        add("    </tr>\n")
    return Markup("".join(out).removesuffix("\n"))  # The template's line ends the last row.
