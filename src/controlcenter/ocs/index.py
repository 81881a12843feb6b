"""The dashboard index's answer (SPEC 4.1, CONTRACT section 4), whichever way the request came
in: `IndexFastPath` for GET, the FastAPI route for the other methods. Every answer except the
200 is pre-rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from starlette.datastructures import Headers, QueryParams
from starlette.requests import cookie_parser
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from controlcenter.auth.refusals import too_many_attempts
from controlcenter.auth.service import PasswordGuard
from controlcenter.auth.throttle import SignInThrottle, TooManyAttemptsError
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.ocs.envelope import (
    NOT_FOUND,
    NOT_LOGGED_IN,
    Format,
    choose_format,
    envelope,
    media_type,
    render,
)
from controlcenter.ocs.service import index_caller, index_message
from controlcenter.web.deps import SESSION_COOKIE

PATH = "/ocs/v2.php/apps/{app_id}/api"
_PATH = compile_path(PATH)[0]  # the regex Starlette's route matches with
_CSRF_FAILED = b'{"message":"CSRF check failed"}'
_UNAUTHORISED = {fmt: render(envelope(997, NOT_LOGGED_IN, []), fmt) for fmt in ("json", "xml")}
_NOT_FOUND = {fmt: render(envelope(404, NOT_FOUND, []), fmt) for fmt in ("json", "xml")}


class IndexParts(Protocol):
    """What the index uses of the app (the app's services provide it)."""

    db: Database
    config: Config


async def answer_index(
    db: Database,
    config: Config,
    app_id: str,
    headers: Headers,
    query: Mapping[str, str],
    client: str | None,
) -> Response:
    fmt: Format = choose_format(query.get("format"), headers.get("accept"))
    if app_id != config.app_id:
        return Response(_NOT_FOUND[fmt], status_code=404, media_type=media_type(fmt))
    guard = PasswordGuard(SignInThrottle.from_config(db, config), client)
    try:
        principal = await index_caller(
            db,
            authorization=headers.get("authorization"),
            session_cookie=_session_cookie(headers.get("cookie")),
            key=config.jwt_key,
            guard=guard,
        )
    except TooManyAttemptsError as exc:
        return too_many_attempts(exc)
    if principal is None:
        return Response(_UNAUTHORISED[fmt], status_code=401, media_type=media_type(fmt))
    if headers.get("ocs-apirequest", "").strip().lower() != "true":
        # Nextcloud's security middleware answers this in JSON whatever format was asked.
        return Response(_CSRF_FAILED, status_code=412, media_type="application/json")
    body = render(envelope(200, "OK", {"message": index_message(principal.user)}), fmt)
    return Response(body, status_code=200, media_type=media_type(fmt))


def _session_cookie(header: str | None) -> str | None:
    """As `Request.cookies` reads it; most calls carry no cookie at all."""
    if not header or SESSION_COOKIE not in header:
        return None
    return cookie_parser(header).get(SESSION_COOKIE)


class IndexFastPath:
    """Answers GET on the index before the framework's middleware, routing and dependency
    resolution, which cost three times the request's own work (py-spy, `make bench`). Every
    other request goes on to the app unchanged; errors propagate to the server-error handler
    as they would from the route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _PATH.match(scope["path"])
            if match is not None:
                query = QueryParams(scope["query_string"]) if scope["query_string"] else {}
                parts: IndexParts = scope["app"].state.services
                client = scope.get("client")
                response = await answer_index(
                    parts.db,
                    parts.config,
                    match["app_id"],
                    Headers(scope=scope),
                    query,
                    client[0] if client else None,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
