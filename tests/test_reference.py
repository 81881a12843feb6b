"""docs/reference.md cannot drift: its tables are compared with the app's routes, the command
line's commands, the configuration's fields and the Makefile's variables.

To leave something out on purpose, add it to the matching NOT_DOCUMENTED set with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from starlette.routing import Mount

from controlcenter.app import create_app
from controlcenter.cli import app as cli_app
from controlcenter.config import Config

NOT_DOCUMENTED_ROUTES: set[tuple[str, str]] = set()
NOT_DOCUMENTED_COMMANDS: set[str] = set()
NOT_DOCUMENTED_VARIABLES: set[str] = set()


@pytest.fixture(scope="module")
def reference(repo_root: Path) -> str:
    return (repo_root / "docs" / "reference.md").read_text()


def section(text: str, title: str) -> list[list[str]]:
    """The rows of the first table under `## title`, as lists of cells."""
    body = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[2:]]


def unquote(cell: str) -> str:
    return cell.strip("`")


def app_routes(config: Config) -> set[tuple[str, str]]:
    app = create_app(config)
    found = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            included = getattr(route, "original_router", None)  # FastAPI's included routers
            if included is not None:
                walk(included.routes, prefix + route.include_context.prefix)
                continue
            path = getattr(route, "path", None)
            if isinstance(route, Mount):
                found.add(("GET", f"{prefix}{route.path}/{{file}}"))
            elif path is not None and not getattr(route, "include_in_schema", True):
                found.update(
                    (m, prefix + path) for m in getattr(route, "methods", ()) if m != "HEAD"
                )

    walk(app.router.routes, "")
    return found


def test_every_endpoint_is_documented(reference: str, config: Config) -> None:
    documented = {(row[0], unquote(row[1])) for row in section(reference, "Endpoints")}
    assert documented == app_routes(config) - NOT_DOCUMENTED_ROUTES


def cli_commands() -> dict[str, set[str]]:
    """Every leaf command (`users create`) with its options."""
    found: dict[str, set[str]] = {}

    def walk(command: Any, prefix: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, [*prefix, name])
        else:
            found[" ".join(prefix)] = {opt for p in command.params for opt in p.opts}

    walk(typer.main.get_command(cli_app), [])
    return found


def test_every_command_and_option_is_documented(reference: str) -> None:
    rows = [unquote(row[0]) for row in section(reference, "Command line")]
    actual = cli_commands()
    documented: dict[str, str] = {}
    for usage in rows:
        words = usage.split()
        assert words[0] == "controlcenter", usage
        name = " ".join(w for w in words[1:3] if re.fullmatch(r"[a-z][a-z-]*", w))
        documented[name] = usage
    expected = set(actual) - NOT_DOCUMENTED_COMMANDS
    assert set(documented) == expected
    for name in expected:
        for option in actual[name]:  # a positional argument is written in capitals: NAME
            assert option in documented[name] or option.upper() in documented[name], (name, option)


def test_every_environment_variable_is_documented_with_its_default(reference: str) -> None:
    rows = {unquote(row[0]): row[1] for row in section(reference, "Environment")}
    fields = {name.upper(): field for name, field in Config.model_fields.items()}
    assert set(rows) == set(fields) - NOT_DOCUMENTED_VARIABLES
    for name, field in fields.items():
        if field.default is not None:
            shown = f"`{field.default}`" if field.default != "" else "empty"
            assert shown in rows[name], (name, field.default, rows[name])


def test_make_variables_are_documented(reference: str, repo_root: Path) -> None:
    makefile = (repo_root / "Makefile").read_text()
    variables = set(re.findall(r"^([A-Z_]+) \?=", makefile, re.MULTILINE))
    variables |= set(re.findall(r"\$\(([A-Z_]+_ARGS)\)", makefile))
    rows = {unquote(row[0]): row[1] for row in section(reference, "make")}
    assert set(rows) == variables
    for name, default in re.findall(r"^([A-Z_]+) \?= ?(.*)$", makefile, re.MULTILINE):
        assert (f"`{default}`" if default else "empty") in rows[name], name


def test_readme_and_docs_stand_alone(repo_root: Path) -> None:
    for path in [repo_root / "README.md", *sorted((repo_root / "docs").glob("*.md"))]:
        assert "../shared" not in path.read_text(), path
