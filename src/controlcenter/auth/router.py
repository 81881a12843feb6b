"""Sign-in, sign-out and the current user (CONTRACT section 2)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError

from controlcenter.auth.dependencies import SESSION_COOKIE, CurrentUser, ServicesDep
from controlcenter.auth.service import authenticate_password, revoke_session, start_session
from controlcenter.errors import ApiError, InvalidJSONError
from controlcenter.http import read_json

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


class LoginBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    email: str
    password: str


@router.post("/login")
async def login(request: Request, services: ServicesDep) -> JSONResponse:
    try:
        body = LoginBody.model_validate(await read_json(request))
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    except ValidationError as exc:
        raise ApiError(400, "Validation failed") from exc
    config = services.config
    async with services.db.write() as db:
        user = await authenticate_password(db, body.email, body.password)
        if user is None:
            raise ApiError(401, "Invalid credentials")
        token = await start_session(db, user, key=config.jwt_key, ttl_s=config.session_ttl_s)
        public = user.public()
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


@router.post("/logout")
async def logout(principal: CurrentUser, services: ServicesDep) -> JSONResponse:
    if principal.session_id is not None:
        async with services.db.write() as db:
            await revoke_session(db, principal.session_id)
    response = JSONResponse({"success": True})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/me")
async def me(principal: CurrentUser) -> dict[str, Any]:
    return {"user": principal.user.public()}
