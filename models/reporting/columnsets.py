"""Column sets: a user's named choices of a panel page's columns, in order, with a sort of up to two
keys (and for the report builder its grouping), one of a page's the default it opens with; beside them
the page's built-in presets (models/reporting/columnpages.py). And the report builder's remembered
grouping: the last levels a user showed, restored on a bare visit.

A set belongs to one user: another's is "not there" (never told apart from a missing one). A user who
hides money may not name a money column; a set saved before the user was told to hide money still
shows none (ColumnPage.shown).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from peewee import Database

from models.errors import LannerError, NotFoundError
from models.reporting.columnpages import ColumnPage
from models.store.database import write_tx
from models.tables.columnset import ColumnSet, ReportMemory

MAX_NAME = 60
MAX_SETS = 50  # Per user and page.
MAX_COLUMNS = 40
MAX_SORT_KEYS = 2
PRESET_PREFIX = "preset:"  # A preset's reference: `preset:money`; a saved set's is its id.


class ColumnSetError(LannerError, ValueError):
    """A set that cannot be saved or used; the message is one sentence for the user."""


class ColumnSetNotFound(ColumnSetError, NotFoundError):
    """No such set of this user's on this page."""


@dataclass(frozen=True)
class SavedSet:
    ref: str  # What `?set=` names: the id, or preset:<name>.
    page: str
    name: str
    columns: tuple[str, ...]
    sort: str
    groups: tuple[str, ...]
    is_default: bool
    is_preset: bool

    @property
    def id(self) -> int | None:
        return None if self.is_preset else int(self.ref)


def _saved(row: ColumnSet, page: ColumnPage, hides_money: bool) -> SavedSet:
    return SavedSet(
        str(row.id),
        row.page,
        row.name,
        page.shown(tuple(c for c in row.columns.split(",") if c), hides_money),
        _shown_sort(row.sort, page, hides_money),
        tuple(g for g in row.groups.split(",") if g),
        bool(row.is_default),
        False,
    )


def _shown_sort(sort: str, page: ColumnPage, hides_money: bool) -> str:
    """The sort without a money key for a user who hides money (the set's columns lose them too)."""
    keys = [k for k in sort.split(",") if k]
    return ",".join(k for k in keys if not (hides_money and k.removeprefix("-") in page.money))


def presets(page: ColumnPage, hides_money: bool) -> list[SavedSet]:
    return [
        SavedSet(
            PRESET_PREFIX + p.name.lower(),
            page.name,
            p.name,
            page.shown(p.columns, hides_money),
            _shown_sort(p.sort, page, hides_money),
            (),
            False,
            True,
        )
        for p in page.presets
    ]


def list_sets(db: Database, user_id: int, page: ColumnPage, hides_money: bool) -> list[SavedSet]:
    """The page's presets, then the user's saved sets by name."""
    rows = (
        ColumnSet.select()
        .where((ColumnSet.user_id == user_id) & (ColumnSet.page == page.name))
        .order_by(ColumnSet.name)
    )
    return presets(page, hides_money) + [_saved(row, page, hides_money) for row in rows]


def get_set(db: Database, user_id: int, page: ColumnPage, ref: str, hides_money: bool) -> SavedSet:
    """The preset or saved set `ref` names; ColumnSetNotFound for none of this user's on this page."""
    ref = ref.strip()
    if ref.lower().startswith(PRESET_PREFIX):
        chosen = page.preset(ref[len(PRESET_PREFIX) :])
        if chosen is not None:
            return next(s for s in presets(page, hides_money) if s.name == chosen.name)
    elif ref.isdigit() and len(ref) < 19:
        row = ColumnSet.get_or_none(
            (ColumnSet.id == int(ref)) & (ColumnSet.user_id == user_id) & (ColumnSet.page == page.name)
        )
        if row is not None:
            return _saved(row, page, hides_money)
    raise ColumnSetNotFound(f"There is no column set {ref[:40]!r} of yours on the {page.name} page.")


def default_set(db: Database, user_id: int, page: ColumnPage, hides_money: bool) -> SavedSet | None:
    row = ColumnSet.get_or_none(
        (ColumnSet.user_id == user_id) & (ColumnSet.page == page.name) & (ColumnSet.is_default == 1)
    )
    return _saved(row, page, hides_money) if row is not None else None


def check_columns(page: ColumnPage, columns: list[str], hides_money: bool) -> tuple[str, ...]:
    """The columns in order, each once; ColumnSetError naming the first the user may not choose."""
    choosable = page.choosable(hides_money)
    for name in columns:
        if name not in choosable:
            raise ColumnSetError(f"{name[:40]!r} is no column here; choose from {', '.join(choosable)}.")
    chosen = tuple(dict.fromkeys(columns))
    if not chosen:
        raise ColumnSetError("Choose at least one column.")
    if len(chosen) > MAX_COLUMNS:
        raise ColumnSetError(f"A set has at most {MAX_COLUMNS} columns.")
    return chosen


def check_sort(page: ColumnPage, sort: str, columns: tuple[str, ...]) -> str:
    """Up to two keys among the page's first column and `columns`, `-` for descending, each once."""
    keys = [part.strip() for part in sort.split(",") if part.strip()]
    allowed = (page.first, *columns)
    names = [key.removeprefix("-") for key in keys]
    if len(keys) > MAX_SORT_KEYS or len(set(names)) < len(names) or any(n not in allowed for n in names):
        raise ColumnSetError(
            f"Sort by up to {MAX_SORT_KEYS} of {', '.join(allowed)} (a - before one: descending)."
        )
    return ",".join(keys)


def save_set(
    db: Database,
    user_id: int,
    page: ColumnPage,
    name: str,
    columns: list[str],
    *,
    hides_money: bool,
    sort: str = "",
    groups: tuple[str, ...] = (),
    is_default: bool = False,
    clock=time.time,
) -> SavedSet:
    """Save the set as `name` (one of the same name on this page is replaced); with `is_default`, the
    page opens with it from now on (another default of the page stops being one)."""
    name = " ".join(name.split())
    if not name:
        raise ColumnSetError("Give the set a name.")
    if len(name) > MAX_NAME:
        raise ColumnSetError(f"A set's name is at most {MAX_NAME} characters.")
    if page.preset(name) is not None:
        raise ColumnSetError(f"{name!r} is a built-in set's name; choose another.")
    chosen = check_columns(page, columns, hides_money)
    sort = check_sort(page, sort, chosen)
    if groups and not page.has_groups:
        raise ColumnSetError(f"A set of the {page.name} page keeps no grouping.")
    where = (ColumnSet.user_id == user_id) & (ColumnSet.page == page.name)
    with write_tx(db):
        existing = ColumnSet.get_or_none(where & (ColumnSet.name == name))
        if existing is None and ColumnSet.select().where(where).count() >= MAX_SETS:
            raise ColumnSetError(f"Keep at most {MAX_SETS} sets on a page; delete one first.")
        if is_default:
            ColumnSet.update(is_default=0).where(where).execute()
        fields = {
            "columns": ",".join(chosen),
            "sort": sort,
            "groups": ",".join(groups),
            "is_default": int(is_default or bool(existing and existing.is_default)),
        }
        if existing is None:
            row = ColumnSet.create(
                user_id=user_id, page=page.name, name=name, created_at=int(clock() * 1000), **fields
            )
        else:
            ColumnSet.update(**fields).where(ColumnSet.id == existing.id).execute()
            row = ColumnSet.get_by_id(existing.id)
    return _saved(row, page, hides_money)


def make_default(db: Database, user_id: int, page: ColumnPage, set_id: int | None) -> None:
    """Make the user's set `set_id` the page's default (None: the page's own columns again)."""
    where = (ColumnSet.user_id == user_id) & (ColumnSet.page == page.name)
    with write_tx(db):
        if set_id is not None and not ColumnSet.select().where(where & (ColumnSet.id == set_id)).exists():
            raise ColumnSetNotFound(f"There is no column set {set_id} of yours on the {page.name} page.")
        ColumnSet.update(is_default=0).where(where).execute()
        if set_id is not None:
            ColumnSet.update(is_default=1).where(where & (ColumnSet.id == set_id)).execute()


def delete_set(db: Database, user_id: int, page: ColumnPage, set_id: int) -> None:
    with write_tx(db):
        deleted = (
            ColumnSet.delete()
            .where((ColumnSet.user_id == user_id) & (ColumnSet.page == page.name) & (ColumnSet.id == set_id))
            .execute()
        )
    if not deleted:
        raise ColumnSetNotFound(f"There is no column set {set_id} of yours on the {page.name} page.")


def remembered_groups(db: Database, user_id: int) -> tuple[str, ...]:
    """The report builder levels the user last showed (none: never)."""
    row = ReportMemory.get_or_none(ReportMemory.user_id == user_id)
    return tuple(g for g in row.groups.split(",") if g) if row is not None else ()


def remember_groups(db: Database, user_id: int, groups: tuple[str, ...], clock=time.time) -> None:
    """Keep `groups` as the user's last grouping (a write only when it changed)."""
    if remembered_groups(db, user_id) == groups:
        return
    text = ",".join(groups)
    now = int(clock() * 1000)
    with write_tx(db):
        updated = (
            ReportMemory.update(groups=text, updated_at=now).where(ReportMemory.user_id == user_id).execute()
        )
        if not updated:
            ReportMemory.insert(user_id=user_id, groups=text, updated_at=now).execute()


def page_of_set(db: Database, user_id: int, set_id: int) -> str:
    """The page of the user's set `set_id`; ColumnSetNotFound for none of theirs."""
    row = ColumnSet.get_or_none((ColumnSet.id == set_id) & (ColumnSet.user_id == user_id))
    if row is None:
        raise ColumnSetNotFound(f"There is no column set {set_id} of yours.")
    return row.page
