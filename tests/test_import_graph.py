"""Guards on the import graph (README, Layout): no circles, and no import from a lower layer into a higher.

Every import counts, at any depth (module level, inside a function, a method, a try block) and under
`if TYPE_CHECKING:` too: a circle that only type checking closes is still a tangle to read.
`from package import name` points at package/name.py when that is a submodule, at package/__init__.py
otherwise. Importing a submodule also runs its packages' __init__.py; that is not counted as an
arrow, or every package whose __init__ gathers its modules would be a circle.

    python tests/test_import_graph.py    prints the circles and the layer breaches, as the tests do
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from test_layout import source_files  # The same files the SQL guard reads.

ROOT = Path(__file__).resolve().parent.parent

# Who must never import whom. A prefix ending in "/" is a folder, one ending in "*" the files that start
# so, else a file. A file follows the rule of its longest matching importer prefix. Each rule:
# (importer, what it must never import, why).
DOMAIN = (
    "models/accounts/",
    "models/admin/",
    "models/clicks/",
    "models/cluster/",
    "models/conversions/",
    "models/lookups/",
    "models/ops/",
    "models/reporting/",
    "models/routing/",
)
STORE = ("models/store/", "models/tables/", "models/migrations/")
EDGES = ("routes/", "workers/", "app.py", "cli/")
EVERYTHING = ("settings.py", "models/", *EDGES, "scripts/")
LEAVES = "files that import nothing of ours"
LAYER_RULES = (
    # The error base and the closed vocabularies: every layer raises and names them; they stand on nothing.
    ("models/errors.py", EVERYTHING, "a leaf: the error base every layer raises"),
    ("models/choices.py", EVERYTHING, "a leaf: the vocabularies every layer names"),
    # The only reader of os.environ; it may check a value with a leaf's parser (models/lookups/iplist.py).
    ("settings.py", (LEAVES,), "settings stands on leaves alone"),
    # The store (its tables, its migrations) serves the domain and never calls it back.
    *((home, (*DOMAIN, *EDGES, "settings.py"), "the store stands below the domain") for home in STORE),
    # A numbered migration is frozen at its release and may backfill with the domain's code of that
    # release (rollups); the runner loads it by name, so nothing imports it and no circle can close.
    ("models/migrations/0*", (*EDGES, "settings.py"), "a migration never imports an edge or settings"),
    # The domain is a library: settings' values and collaborators are passed in by the edges.
    ("models/", (*EDGES, "settings.py"), "the domain never imports an edge or settings"),
    # The runtime (tasks, heartbeats) and ops (status, renderers) run the domain's jobs: the app wires
    # them, routes enqueue tasks and show the status, `lanner serve` hands the app to the process manager.
    ("workers/", ("routes/", "app.py", "cli/", "workers/bench/"), "the workers stand below the app"),
    # Resources are wired by the app and never reach back into it, the CLI or the bench that measures them.
    ("routes/", ("app.py", "cli/", "workers/bench/"), "routes stand below the app"),
    # The app factory only wires; the CLI (and the bench, through `lanner serve`) call it.
    ("app.py", ("cli/", "workers/bench/"), "the app stands below the CLI"),
    # The bench drives the whole stack from outside, through processes it starts; the CLI runs it.
    ("workers/bench/", ("cli/",), "the CLI runs the bench"),
    # The top floor: a command may call anything but a script.
    ("cli/", (), "the CLI is the top floor"),
)
# And for every file but a script: scripts are entry points run by hand, imported by nothing.


def module_files() -> dict[str, str]:
    """Dotted module name -> file path, for every file of the graph."""
    found = {}
    for path in source_files():
        name = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        found[name] = path
    return found


def package_of(path: str) -> str:
    """The dotted package a relative import in this file starts from."""
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts if parts[-1] == "__init__" else parts[:-1]).removesuffix(".__init__")


def imports_in(path: str, modules: dict[str, str]) -> list[tuple[str, int, str]]:
    """(imported file, line, the import as written) for every import of a project file in `path`."""
    tree = ast.parse((ROOT / path).read_text(), path)
    found = []

    def add(module: str, node: ast.stmt) -> None:
        # `import a.b.c` of a name that is not a module (a missing file, a third-party package) counts
        # for the longest prefix that is one of ours, if any.
        while module and module not in modules:
            module = module.rpartition(".")[0]
        arrow = (modules.get(module, ""), node.lineno, ast.unparse(node))
        if module and arrow not in found:  # `from a import b, c` of one module is one arrow.
            found.append(arrow)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = package_of(path).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(filter(None, [*package, base]))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in modules else base, node)
    return found


@functools.cache
def import_graph() -> dict[str, list[tuple[str, int, str]]]:
    modules = module_files()
    return {path: imports_in(path, modules) for path in modules.values()}


def circles(graph: dict[str, list[tuple[str, int, str]]]) -> list[list[str]]:
    """Strongly connected components of more than one file, and files that import themselves (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot reach the recursion limit.
        work = [(start, iter({target for target, _, _ in graph[start]}))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter({t for t, _, _ in graph[target]})))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or any(target == node for target, _, _ in graph[node]):
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe_circle(graph: dict[str, list[tuple[str, int, str]]], component: list[str]) -> str:
    members = set(component)
    lines = [f"circle of {len(component)} file(s): {', '.join(component)}"]
    for path in component:
        for target, line, written in graph[path]:
            if target in members:
                lines.append(f"  {path}:{line} -> {target}: {written}")
    return "\n".join(lines)


def matches(path: str, prefix: str) -> bool:
    if prefix.endswith("*"):
        return path.startswith(prefix[:-1])
    return path.startswith(prefix) if prefix.endswith("/") else path == prefix


def rule_for(path: str) -> tuple[str, tuple[str, ...], str] | None:
    """The rule of the longest importer prefix that matches `path`."""
    governing = [rule for rule in LAYER_RULES if matches(path, rule[0])]
    return max(governing, key=lambda rule: len(rule[0]), default=None)


def layer_breaches(graph: dict[str, list[tuple[str, int, str]]]) -> list[str]:
    leaves = {path for path, imports in graph.items() if all(target == path for target, _, _ in imports)}
    found = set()
    for path, imports in sorted(graph.items()):
        rule = None if path.startswith("scripts/") else rule_for(path)  # A script may import anything.
        for target, line, written in imports:
            if target == path:
                continue  # A circle, reported as one.
            if target.startswith("scripts/") and not path.startswith("scripts/"):
                why = "nothing imports scripts"
            elif rule and LEAVES in rule[1] and target not in leaves:
                why = rule[2]
            elif rule and any(matches(target, banned) for banned in rule[1] if banned != LEAVES):
                why = rule[2]
            else:
                continue
            found.add(f"{path}:{line} -> {target}: {written}  ({why})")
    return sorted(found, key=lambda text: (text.split(":")[0], int(text.split(":")[1].split(" ")[0])))


def test_no_file_imports_itself_through_others():
    graph = import_graph()
    found = circles(graph)
    assert found == [], "import circles:\n" + "\n".join(describe_circle(graph, c) for c in found)


def test_no_layer_imports_a_higher_one():
    found = layer_breaches(import_graph())
    assert found == [], "imports against the layers:\n" + "\n".join(found)


def test_the_graph_sees_imports_inside_functions_and_submodules():
    # The reader itself: an import inside a function (create_app's) and `from package import module`
    # (add_panel_routes's) are arrows; every arrow ends at a file of the graph; every file has a rule.
    graph = import_graph()
    arrows = {(path, target) for path, imports in graph.items() for target, _, _ in imports}
    assert len(graph) > 100
    assert all(target in graph for _, target in arrows)
    assert ("app.py", "routes/panel/__init__.py") in arrows
    assert ("routes/panel/__init__.py", "routes/panel/simulate.py") in arrows
    assert all(rule_for(path) for path in graph if not path.startswith("scripts/"))


if __name__ == "__main__":
    graph = import_graph()
    for component in circles(graph):
        print(describe_circle(graph, component))
    print("\n".join(layer_breaches(graph)))
