"""GET on the dashboard index, answered in front of the whole framework (`web/direct.py`:
the request id, the metrics and an unexpected error's 500 as the stack gives them).

The request's headers are read in one pass.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from starlette.datastructures import QueryParams
from starlette.types import Scope, Send

from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.ocs.index import PATH, PATH_PATTERN, answer_index
from controlcenter.web.direct import Answer, DirectRoute

_PREFIX = PATH.split("{", 1)[0]  # a cheap test before the regex: most paths are not the index
_WANTED = frozenset(
    (b"authorization", b"cookie", b"accept", b"ocs-apirequest"),
)


class IndexParts(Protocol):
    """What the index uses of the app (the app's services provide it)."""

    db: Database
    config: Config


class PartsHolder(Protocol):
    """Where the parts are found once the app has started (the app's `state`)."""

    services: IndexParts


class IndexFastPath:
    def __init__(self, state: PartsHolder) -> None:
        self._state = state
        self._route = DirectRoute(PATH, "GET")

    @staticmethod
    def app_id(path: str) -> str | None:
        """The app id when `path` is the index's, else None."""
        if not path.startswith(_PREFIX):
            return None
        match = PATH_PATTERN.match(path)
        return match["app_id"] if match is not None else None

    async def answer(self, scope: Scope, send: Send, app_id: str) -> None:
        """Answer a GET on the index for `app_id`."""
        await self._route.run(scope, send, partial(self._answer, scope, app_id))

    async def _answer(self, scope: Scope, app_id: str) -> Answer:
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _WANTED and name not in found:  # the first of each, as Headers.get
                found[name] = value
        parts = self._state.services
        query = scope["query_string"]
        client = scope.get("client")
        return await answer_index(
            parts.db,
            parts.config,
            app_id,
            authorization=_text(found.get(b"authorization")),
            cookie=_text(found.get(b"cookie")),
            accept=_text(found.get(b"accept")),
            ocs_apirequest=_text(found.get(b"ocs-apirequest")),
            query_format=QueryParams(query).get("format") if query else None,
            client=client[0] if client else None,
        )


def _text(value: bytes | None) -> str | None:
    # Header values are latin-1 on the wire, as Starlette's `Headers` decodes them.
    return value.decode("latin-1") if value is not None else None
