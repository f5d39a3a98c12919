"""Guards on the house plan (README, Layout): SQL lives in the store, and the domain imports no edge.

A SQL statement, `import sqlite3`, `execute_sql` or a raw `SQL(...)` fragment outside models/store/,
models/migrations/ and workers/bench/ fails: the store owns every statement, so a PostgreSQL store
is a sibling of models/store/sqlite/ under a neutral base, not a search through the code base.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL_HOMES = ("models/store/", "models/migrations/", "workers/bench/")
# A statement as written in this code base: a keyword in capitals at the start of a string.
SQL_START = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|"
    r"RELEASE|WITH|VACUUM|ANALYZE|ATTACH)\s"
)
EDGES = ("routes", "workers", "app", "cli")


def source_files() -> list[str]:
    files = [ROOT / "app.py", ROOT / "settings.py", *(ROOT / "scripts").glob("*.py")]
    for package in ("cli", "models", "routes", "workers"):
        files += (ROOT / package).rglob("*.py")
    return sorted(str(path.relative_to(ROOT)) for path in files)


def holds_sql(tree: ast.AST) -> bool:
    # `import sqlite3` under `if TYPE_CHECKING:` only names a type.
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_START.match(node.value):
            return True
        if isinstance(node, ast.Import) and any(alias.name == "sqlite3" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "execute_sql":
            return True
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "SQL":
            return True  # A raw fragment inside a Peewee query.
    return False


def imported_modules(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def parsed(path: str) -> ast.AST:
    return ast.parse((ROOT / path).read_text(), path)


def test_sql_is_written_only_in_the_store_migrations_and_bench():
    outside = {path for path in source_files() if not path.startswith(SQL_HOMES) and holds_sql(parsed(path))}
    assert outside == set(), "SQL outside the store: move it into models/store/"


def test_the_meta_table_is_read_and_written_only_by_its_store():
    # It was a protocol spread over 5 modules, with two statements for one config-version bump.
    statement = re.compile(r"\b(FROM|UPDATE|INTO)\s+meta\b")
    # PostgreSQL's baseline (postgres/schema.py) writes the rows SQLite's migrations 0001..0011 write.
    homes = (
        "models/store/meta.py",
        "models/store/sqlite/meta.py",  # The same store's dialect siblings.
        "models/store/postgres/meta.py",
        "models/migrations/0",
        "models/store/postgres/schema.py",
    )
    offenders = set()
    for path in source_files():
        if path.startswith(homes):
            continue
        for node in ast.walk(parsed(path)):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and statement.search(node.value)
            ):
                offenders.add(path)
    assert offenders == set()


def in_scopes(tree: ast.AST):
    """Every node with the dotted name of the classes and functions around it ('' at module level)."""
    stack = [(tree, "")]
    while stack:
        node, scope = stack.pop()
        yield scope, node
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = f"{scope}.{node.name}".lstrip(".")
        stack.extend((child, scope) for child in ast.iter_child_nodes(node))


def test_a_conversion_changes_status_in_one_place():
    # A postback and a status map each wrote the change their own way (two `map_status`s). Now one
    # statement writes it, one store method runs that statement, and one function calls that method.
    writes = re.compile(r"UPDATE\s+conversion\s+SET\b[^;]*\bstatus\s*=", re.S)
    found, named, called = [], [], []
    for path in source_files():
        for scope, node in in_scopes(parsed(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and writes.search(node.value):
                found.append((path, scope))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("update", "save")
                and "conversion" in ast.unparse(node.func.value).lower()
            ):
                found.append((f"{path}:{node.lineno}", scope))  # A Peewee write of a Conversion.
            if "SQL_CHANGE_STATUS" in (getattr(node, "id", None), getattr(node, "attr", None)):
                named.append((path, scope))
            if isinstance(node, ast.Call) and "write_status" in (
                getattr(node.func, "id", None),
                getattr(node.func, "attr", None),
            ):
                called.append((path, scope))
    store = "models/store/conversions.py"
    # SQL_CHANGE_STATUS, run by ConversionStore.write_status alone, which change_status alone calls.
    assert found == [(store, "ConversionStore")]
    assert sorted(named) == [(store, "ConversionStore"), (store, "ConversionStore.write_status")]
    assert called == [("models/conversions/postbacks.py", "change_status")]


def test_the_domain_never_imports_the_edges():
    offenders = {
        path: sorted(module for module in imported_modules(parsed(path)) if module.split(".")[0] in EDGES)
        for path in source_files()
        if path.startswith("models/")
    }
    assert {path: modules for path, modules in offenders.items() if modules} == {}


# Raised to steer a request, not to tell a user anything: the click path and the postback body check.
# ClickApiError is a falcon HTTPError: the edge's answer, never the CLI's.
INTERNAL_ERRORS = {"SpoolUnwritable", "BodyTooLarge", "ClickApiError", "_DryRun"}


def test_every_error_a_user_can_act_on_is_a_lanner_error():
    # The CLI maps LannerError to one sentence in one place (cli/__init__.py LannerGroup): an error class
    # outside that family would reach the user as a traceback.
    import importlib
    import inspect

    from models.errors import LannerError

    strays = []
    for path in source_files():
        if not path.startswith(("models/", "workers/", "routes/")) or "/migrations/0" in path:
            continue
        module = importlib.import_module(path.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, Exception)
                and value.__module__ == module.__name__
                and name not in INTERNAL_ERRORS
                and not issubclass(value, LannerError)
            ):
                strays.append(f"{path}: {name}")
    assert strays == []


# The store's dialects: models/store/<aggregate>.py is the neutral base the domain imports; sqlite/ and
# postgres/ hold its siblings (huey's BaseSqlStorage with SqliteStorage and PostgresStorage).
DIALECTS = ("sqlite", "postgres")


def store_files(dialect: str) -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "models/store" / dialect).glob("*.py"))


def dialect_imports(tree: ast.AST) -> set[str]:
    """The dialect packages a module imports, at module level or inside a function (a string given to
    importlib does not count: the store's own dispatch builds those)."""
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            for dialect in DIALECTS:
                if name == f"models.store.{dialect}" or name.startswith(f"models.store.{dialect}."):
                    found.add(dialect)
    return found


def test_nothing_outside_the_store_imports_a_dialect():
    # The domain names the neutral store (`AuditStore(conn)` from models/store/audit.py) and gets the
    # sibling for its connection's dialect: a SQLite process never loads psycopg, and PostgreSQL runs
    # PostgreSQL's statements, never SQLite's.
    offenders = {
        path: sorted(found)
        for path in source_files()
        if not path.startswith("models/store/") and (found := dialect_imports(parsed(path)))
    }
    assert offenders == {}


def test_the_dialects_are_siblings_that_never_import_each_other():
    offenders = {}
    for dialect, other in (DIALECTS, DIALECTS[::-1]):
        for path in store_files(dialect):
            if other in dialect_imports(parsed(path)):
                offenders[path] = other
    assert offenders == {}


def test_every_dialect_class_with_a_sibling_subclasses_the_neutral_base():
    import importlib
    import inspect

    def classes(path: str) -> dict[str, type]:
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        return {
            name: value
            for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__
        }

    names = {dialect: {path.rsplit("/", 1)[1] for path in store_files(dialect)} for dialect in DIALECTS}
    strays = []
    for module_name in sorted(names["sqlite"] & names["postgres"] - {"__init__.py"}):
        sqlite, postgres = (classes(f"models/store/{dialect}/{module_name}") for dialect in DIALECTS)
        for name in sorted(sqlite.keys() & postgres.keys()):
            neutral = importlib.import_module(f"models.store.{module_name.removesuffix('.py')}")
            base = getattr(neutral, name, None)
            for dialect, sibling in zip(DIALECTS, (sqlite[name], postgres[name]), strict=True):
                if base is None or sibling.__bases__ != (base,) or sibling.dialect != dialect:
                    strays.append(f"models/store/{dialect}/{module_name}: {name}")
    assert strays == []
