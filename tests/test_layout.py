"""The package's layers (docs/architecture.md): every import points down, `web/` imports no
domain, no import cycle between packages, and nothing loose at the top.

The graph is read from the source: every `import` at any depth of a module, those under
`if TYPE_CHECKING:` included (a type-only import still ties a lower layer to a higher one).
Every module counts, Alembic's script directory (`db/migrations/`) included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "controlcenter"
TOP_MODULES = {"__init__.py", "app.py", "config.py", "asgi.py", "tables.py"}

# From the top down. A package imports only packages of the tiers below its own, so the
# packages of one tier never import each other.
TOP = [
    ("asgi", "cli"),
    ("app", "tables"),
    ("pages",),
]
DOMAINS = [
    ("accounts", "activity", "integrations"),
    ("chat", "onboarding"),
    ("crm", "ocs"),
    ("outbox", "providers", "tools"),
    ("admin_settings",),
    ("auth",),
]
INFRASTRUCTURE = [
    ("web",),
    ("db", "llm", "observability"),
    ("common", "config"),
]
TIERS = [*TOP, *DOMAINS, *INFRASTRUCTURE]
TIER_OF = {package: n for n, tier in enumerate(TIERS) for package in tier}


def modules(root: Path = PACKAGE) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(), str(path))


def imports(tree: ast.Module) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it), those under `if TYPE_CHECKING:` included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)


def package_of(module: str) -> str | None:
    """The top-level package (or top module) a module belongs to, below `controlcenter`."""
    parts = module.split(".")
    if parts[0] != "controlcenter" or len(parts) < 2:
        return None
    return parts[1]


def package_graph(found: Iterator[tuple[str, ast.Module]]) -> dict[str, dict[str, str]]:
    """package -> {package it imports: one import that shows it}."""
    graph: dict[str, dict[str, str]] = {}
    for name, tree in found:
        source = package_of(name)
        if source is None:
            continue
        for imported, _ in imports(tree):
            target = package_of(imported)
            if target is not None and target != source:
                graph.setdefault(source, {}).setdefault(target, f"{name} -> {imported}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_packages() -> None:
    graph = package_graph(modules())
    found = cycles(graph)
    shown = [
        f"{cycle}: " + "; ".join(graph[a][b] for a in cycle for b in cycle if b in graph.get(a, {}))
        for cycle in found
    ]
    assert not found, "\n".join(shown)


def test_every_module_is_read() -> None:
    """Alembic's scripts too (`db/migrations/`, loaded by path, never imported): they are part
    of `db` and import nothing above it."""
    names = {name for name, _ in modules()}
    assert {"controlcenter.db.migrations.env", "controlcenter.tables"} <= names
    assert "auth" in package_graph(modules())["tables"]


def test_every_package_has_its_tier() -> None:
    graph = package_graph(modules())
    packages = set(graph) | {target for targets in graph.values() for target in targets}
    placed = set(TIER_OF)
    assert packages <= placed, f"packages in no tier: {sorted(packages - placed)}"
    assert len(placed) == sum(map(len, TIERS)), "a package in two tiers"


def upward(graph: dict[str, dict[str, str]]) -> list[str]:
    """The imports that do not point to a lower tier, one example each."""
    return [
        example
        for source, targets in graph.items()
        for target, example in targets.items()
        if TIER_OF.get(target, -1) <= TIER_OF.get(source, -1)
    ]


def test_every_import_points_down() -> None:
    found = upward(package_graph(modules()))
    assert not found, "imports that do not point down:\n" + "\n".join(found)


def test_web_imports_no_domain() -> None:
    infrastructure = {package for tier in INFRASTRUCTURE for package in tier}
    graph = package_graph(modules())
    beyond = {t: e for t, e in graph["web"].items() if t not in infrastructure}
    assert not beyond, f"web/ imports beyond the infrastructure: {beyond}"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Two packages importing each other are a cycle; a type-checking import from a lower tier
    to a higher one is an import that does not point down."""
    root = tmp_path / "controlcenter"
    for package, imported in (("a", "b"), ("b", "a")):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "m.py").write_text(f"from controlcenter.{imported}.m import x\n")
    for package in ("web", "auth"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "web" / "t.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from controlcenter.auth import y\n"
    )
    (root / "__init__.py").write_text("")
    graph = package_graph(modules(root))
    assert cycles(graph) == [["a", "b"]]
    assert "controlcenter.web.t -> controlcenter.auth" in upward(graph)


def test_the_top_shows_only_the_app_and_packages() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")} - TOP_MODULES
    assert not loose, f"modules loose at the top of the package: {sorted(loose)}"
