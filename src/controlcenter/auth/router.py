"""Sign-in, sign-out and the current user."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from controlcenter.auth.deps import SESSION_COOKIE, CurrentUser
from controlcenter.auth.refusals import client_address
from controlcenter.auth.schemas import USER_EXAMPLE, LoginAnswer, LoginRequest, UserAnswer
from controlcenter.auth.service import (
    authenticate_password,
    current_user,
    revoke_session,
    start_checked_session,
)
from controlcenter.auth.throttle import SignInThrottle
from controlcenter.web.body import read_json
from controlcenter.web.deps import ConfigDep, DatabaseDep
from controlcenter.web.errors import ApiError, InvalidJSONError
from controlcenter.web.openapi_doc import Success, answers, json_body

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])

NOT_A_SESSION = (
    "An API token is not a session: revoke it with DELETE /api/v1/auth/tokens/{id} "
    "(its id is listed by GET /api/v1/auth/tokens)"
)


@router.post(
    "/login",
    **answers(
        LoginAnswer,
        400,
        401,
        413,
        429,
        write=True,
        example={"token": "eyJhbGciOiJIUzI1NiJ9...", "user": USER_EXAMPLE},
    ),
    openapi_extra=json_body(LoginRequest),
)
async def login(request: Request, database: DatabaseDep, config: ConfigDep) -> JSONResponse:
    try:
        body = LoginRequest.model_validate(await read_json(request))
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    except ValidationError as exc:
        raise ApiError(400, "Validation failed") from exc
    throttle = SignInThrottle.from_config(database, config)
    attempt = await throttle.begin(body.email, client_address(request))  # or 429
    user = await authenticate_password(database, body.email, body.password)
    if user is None:
        raise ApiError(401, "Invalid credentials")
    token = await database.run_write(
        start_checked_session, user, key=config.jwt_key, ttl_s=config.session_ttl_s
    )
    if token is None:  # deleted, disabled or given a new password while it was checked
        raise ApiError(401, "Invalid credentials")
    public = user.public()
    await throttle.succeeded(attempt)
    response = JSONResponse({"token": token, "user": public})
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=config.session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=config.cookie_secure,
        path="/",
    )
    return response


@router.post("/logout", **answers(Success, 400, 401, write=True))
async def logout(principal: CurrentUser, database: DatabaseDep, config: ConfigDep) -> JSONResponse:
    """End the caller's session. An API token is no session: 400 says how to revoke one."""
    if principal.session_id is None:
        raise ApiError(400, NOT_A_SESSION)
    await database.run_write(revoke_session, principal.session_id)
    response = JSONResponse({"success": True})
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        samesite="lax",
        secure=config.cookie_secure,
    )
    return response


@router.get("/me", **answers(UserAnswer, 401))
async def me(principal: CurrentUser, database: DatabaseDep) -> dict[str, Any]:
    """The caller's row as it is now: a save's new brokerage shows at once."""
    user = await current_user(database, principal.user.id)
    if user is None:  # deleted or disabled since the credential was checked
        raise ApiError(401, "Unauthorized")
    return {"user": user.public()}
