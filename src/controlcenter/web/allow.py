"""The full `Allow` list of a 405 answer.

The router answers 405 with the methods of the first route whose path matched, while one path
is often served by several routes (GET and DELETE of a conversation). This collects every
method of every route whose path matches, from the interface description the app publishes.

A fixed path segment is never taken as an id: when several paths match, only those with the
most fixed segments count, so `/mcp-servers/status` answers its own methods, not those of
`/mcp-servers/{server_id}`.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from starlette.routing import compile_path

_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class AllowedMethods:
    def __init__(self, app: Any) -> None:
        self._app = app  # a FastAPI app; read on first use, when every route is registered

    @cached_property
    def _routes(self) -> list[tuple[re.Pattern[str], int, frozenset[str]]]:
        """(the path's pattern, its count of fixed segments, its methods) of every path."""
        routes = []
        for path, operations in self._app.openapi()["paths"].items():
            methods = frozenset(name.upper() for name in operations) & frozenset(_ORDER)
            fixed = sum(1 for segment in path.split("/") if "{" not in segment)
            routes.append((compile_path(path)[0], fixed, methods))
        return routes

    def header(self, path: str) -> str | None:
        """`Allow` for `path`, or None when no documented route serves it."""
        matched = [(fixed, allowed) for regex, fixed, allowed in self._routes if regex.match(path)]
        if not matched:
            return None
        most = max(fixed for fixed, _ in matched)
        methods = set().union(*(allowed for fixed, allowed in matched if fixed == most))
        return ", ".join(m for m in _ORDER if m in methods) or None
