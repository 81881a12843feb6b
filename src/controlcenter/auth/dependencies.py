"""FastAPI dependencies for the caller's identity and role."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.auth.models import SUPER_ADMIN
from controlcenter.auth.service import Principal, principal_from_bearer, principal_from_jwt
from controlcenter.web.deps import Services, get_services
from controlcenter.web.errors import ApiError

SESSION_COOKIE = "session"


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


async def optional_principal(
    request: Request, services: Annotated[Services, Depends(get_services)]
) -> Principal | None:
    """The caller from `Authorization: Bearer` (preferred) or the `session` cookie.

    A bearer header that is present decides on its own (a wrong one is no session, even beside
    a valid cookie); the cookie only ever carries a session JWT, never an API token.
    """
    token = bearer_token(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if not token and not cookie:
        return None
    key = services.config.jwt_key
    if token:
        return await principal_from_bearer(services.db, token, key=key)
    assert cookie is not None
    return await principal_from_jwt(services.db, cookie, key=key)


async def require_user(
    principal: Annotated[Principal | None, Depends(optional_principal)],
) -> Principal:
    if principal is None:
        raise ApiError(401, "Unauthorized")
    return principal


async def require_super_admin(
    principal: Annotated[Principal | None, Depends(optional_principal)],
) -> Principal:
    if principal is None or principal.user.role != SUPER_ADMIN:
        raise ApiError(403, "Forbidden")
    return principal


CurrentUser = Annotated[Principal, Depends(require_user)]
SuperAdmin = Annotated[Principal, Depends(require_super_admin)]
ServicesDep = Annotated[Services, Depends(get_services)]
