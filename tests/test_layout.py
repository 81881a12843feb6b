"""The package's shape (docs/architecture.md): no import cycle between its packages, nothing
loose at the top, and `Services` seen only where the app is put together.

The graph is read from the source (every `import` that runs, at any depth of a module; imports
under `if TYPE_CHECKING:` are left out, since they never run). Every module counts, Alembic's
script directory (`db/migrations/`) included; it and `web/` count apart (see `package_of`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "controlcenter"
TOP_MODULES = {"__init__.py", "app.py", "config.py", "asgi.py", "tables.py"}
SEES_SERVICES = {"controlcenter.app", "controlcenter.web.deps"}


def modules(root: Path = PACKAGE) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(), str(path))


def runtime_imports(tree: ast.Module) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it), skipping `if TYPE_CHECKING:` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)


def package_of(module: str) -> str | None:
    """The top-level package (or top module) a module belongs to, below `controlcenter`.

    `web/` is the HTTP edge, of two kinds: what every router uses (errors, bodies, validation,
    middleware) and the app's surface over the domains (deps, pages, the OpenAPI document). So
    each of its modules and subpackages counts on its own: a router may use `web.errors` while
    `web.pages` shows the router's domain.

    `db/migrations/` (Alembic's scripts, loaded by path, never imported) is the schema's history
    over every domain's tables, so it counts on its own, above the domains: its `env.py` reads
    the table registry (`controlcenter.tables`), which imports every domain's models.
    """
    parts = module.split(".")
    if parts[0] != "controlcenter" or len(parts) < 2:
        return None
    if parts[1] == "web" and len(parts) > 2:
        return ".".join(parts[1:3])
    if parts[1:3] == ["db", "migrations"]:
        return "db.migrations"
    return parts[1]


def package_graph(found: Iterator[tuple[str, ast.Module]]) -> dict[str, dict[str, str]]:
    """package -> {package it imports: one import that shows it}."""
    graph: dict[str, dict[str, str]] = {}
    for name, tree in found:
        source = package_of(name)
        if source is None:
            continue
        for imported, _ in runtime_imports(tree):
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


def test_every_module_is_in_the_graph() -> None:
    """Alembic's scripts too: `env.py` reads the table registry, which imports the domains."""
    graph = package_graph(modules())
    assert set(graph["db.migrations"]) >= {"tables", "db"}
    assert "auth" in graph["tables"]
    importers = [source for source, targets in graph.items() if "db.migrations" in targets]
    assert not importers, f"db/migrations is loaded by Alembic, never imported: {importers}"


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    """Two packages importing each other are reported; a type-checking import is not."""
    root = tmp_path / "controlcenter"
    for package, imported in (("a", "b"), ("b", "a"), ("c", "a")):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "m.py").write_text(f"from controlcenter.{imported}.m import x\n")
    (root / "a" / "t.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from controlcenter.c.m import y\n"
    )
    (root / "__init__.py").write_text("")
    assert cycles(package_graph(modules(root))) == [["a", "b"]]


def test_the_top_shows_only_the_app_and_packages() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")} - TOP_MODULES
    assert not loose, f"modules loose at the top of the package: {sorted(loose)}"


@pytest.mark.parametrize("name", ["Services", "ServicesDep", "get_services"])
def test_only_the_app_and_web_deps_see_services(name: str) -> None:
    seen = sorted(
        module
        for module, tree in modules()
        if module not in SEES_SERVICES
        and any(
            isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names)
            for node in ast.walk(tree)
        )
    )
    assert not seen, f"{name} imported outside app.py and web/deps.py: {seen}"
