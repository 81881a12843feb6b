"""Route dependencies of sign-in: the caller, and the role checks.

The caller is read from `Authorization: Bearer` or the `session` cookie by FastAPI's own
security classes, so every protected route declares both schemes in /openapi.json. The app
puts its `RequestAuth` on `app.state.auth` when it starts (`app.py`).

No `from __future__ import annotations` here: FastAPI reads the `Annotated` dependencies of
these functions at run time.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from controlcenter.auth.principal import Principal
from controlcenter.auth.service import RequestAuth
from controlcenter.web.errors import ApiError

SESSION_COOKIE = "session"

# The two ways a caller shows a session, read by FastAPI's own security classes so that every
# protected route declares them in /openapi.json.
BEARER = HTTPBearer(
    auto_error=False, scheme_name="bearer_auth", description="A session JWT or an API token"
)
COOKIE = APIKeyCookie(
    name=SESSION_COOKIE,
    auto_error=False,
    scheme_name="cookie_auth",
    description="The session cookie set by POST /api/v1/auth/login",
)


async def get_request_auth(request: Request) -> RequestAuth:
    """The app's `RequestAuth`. Async, so `Depends` resolves it on the event loop instead of a
    thread-pool hop per request."""
    auth: RequestAuth = request.app.state.auth
    return auth


async def optional_principal(
    auth: Annotated[RequestAuth, Depends(get_request_auth)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
    cookie: Annotated[str | None, Security(COOKIE)],
) -> Principal | None:
    """The caller from `Authorization: Bearer` (preferred) or the `session` cookie.

    A bearer header that is present decides on its own (a wrong one is no session, even beside
    a valid cookie); the cookie only ever carries a session JWT, never an API token.
    """
    token = bearer.credentials.strip() if bearer is not None else None
    if not token and not cookie:
        return None
    return await auth.principal(token, cookie)


async def require_user(
    principal: Annotated[Principal | None, Depends(optional_principal)],
) -> Principal:
    if principal is None:
        raise ApiError(401, "Unauthorized")
    return principal


def _role_check(
    allows: Callable[[Principal], bool], what: str
) -> Callable[[Principal | None], Awaitable[Principal]]:
    async def check(
        principal: Annotated[Principal | None, Depends(optional_principal)],
    ) -> Principal:
        if principal is None or not allows(principal):
            raise ApiError(403, "Forbidden")
        return principal

    check.__doc__ = f"The caller, when {what}; 403 otherwise."
    return check


require_super_admin = _role_check(lambda p: p.is_super_admin, "a super administrator")
# User administration is for administrators and super administrators alike.
require_admin = _role_check(lambda p: p.is_admin, "an administrator or a super administrator")


CurrentUser = Annotated[Principal, Depends(require_user)]
Admin = Annotated[Principal, Depends(require_admin)]
SuperAdmin = Annotated[Principal, Depends(require_super_admin)]
