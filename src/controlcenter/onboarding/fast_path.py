"""POST /api/v1/onboarding, answered in front of the whole framework (`web/direct.py`).

A broker's save is the service's hottest write. Through the stack, FastAPI's routing, its
dependency solving (the session's three security dependencies and the services') and its
answer's encoding cost about as much CPU as the save itself, its statements and its
transaction included (py-spy, BENCHMARKS.md). Here the same steps, in the stack's order, each
through the code the stack uses:

1. a state-changing request from another site: 403 (`CrossOriginProtection`'s rule);
2. the body, at most `max_body_bytes` (413 otherwise, as `BodyLimitMiddleware` reads it);
3. the caller, from `Authorization: Bearer` or else the session cookie, as `CurrentUser`
   reads them: 401 without one;
4. the save and its answer (`router.saved`, the route's own).
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from controlcenter.auth.service import RequestAuth
from controlcenter.onboarding.router import saved
from controlcenter.onboarding.service import OnboardingSaves
from controlcenter.web.direct import (
    JSON,
    Answer,
    DirectRoute,
    bearer_token,
    error_answer,
    json_answer,
    session_cookie,
)
from controlcenter.web.errors import ApiError
from controlcenter.web.middleware.body_limit import TOO_LARGE, BodyTooLarge, ClientGone, read_body
from controlcenter.web.middleware.cross_origin import REFUSED, is_refused

PATH = "/api/v1/onboarding"
_REFUSED = Answer(403, REFUSED, JSON, routed=False)
_TOO_LARGE = Answer(413, TOO_LARGE, JSON, ((b"connection", b"close"),), routed=False)
_UNAUTHORIZED = error_answer(ApiError(401, "Unauthorized"))


class SaveParts(Protocol):
    """What the save uses of the app (the app's services provide it)."""

    auth: RequestAuth
    onboarding: OnboardingSaves


class PartsHolder(Protocol):
    """Where the parts are found once the app has started (the app's `state`)."""

    services: SaveParts


class SaveFastPath:
    def __init__(self, state: PartsHolder, max_body_bytes: int, allowed: frozenset[str]) -> None:
        self._state = state
        self._limit = max_body_bytes
        self._allowed = allowed
        self._route = DirectRoute(PATH, "POST")

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a POST on `PATH`."""
        await self._route.run(scope, send, partial(self._answer, scope, receive))

    async def _answer(self, scope: Scope, receive: Receive) -> Answer | None:
        headers = Headers(scope=scope)
        if is_refused("POST", headers, self._allowed):
            return _REFUSED
        try:
            raw = await read_body(scope, receive, self._limit)
        except BodyTooLarge:
            return _TOO_LARGE
        except ClientGone:
            return None
        parts = self._state.services
        token, cookie = (
            bearer_token(headers.get("authorization")),
            session_cookie(headers.get("cookie")),
        )
        principal = await parts.auth.principal(token, cookie) if token or cookie else None
        if principal is None:
            return _UNAUTHORIZED
        try:
            return json_answer(200, await saved(parts.onboarding, principal.user.id, raw))
        except ApiError as exc:
            return error_answer(exc)
