"""Static files served with headers of their own (security headers, caching)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope


class HeaderedStaticFiles(StaticFiles):
    """StaticFiles whose every answer carries `headers`."""

    def __init__(self, *, directory: Path, headers: Mapping[str, str]) -> None:
        super().__init__(directory=directory)
        self._headers = dict(headers)

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(self._headers)
        return response
