"""The caller's own API tokens and password: any signed-in user."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from controlcenter.accounts import tokens, users
from controlcenter.accounts.schemas import NewToken, PasswordChange, TokenCreate, TokenList
from controlcenter.auth.deps import CurrentUser
from controlcenter.web.body import read_model
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import Success, answers, json_body

router = APIRouter(prefix="/api/v1/auth", tags=["account"])

TOKEN_NOT_FOUND = "Token not found"  # noqa: S105 - a message, not a secret
WRONG_PASSWORD = {
    "path": ["currentPassword"],
    "message": "Current password is incorrect",
    "type": "password_mismatch",
}


@router.get("/tokens", **answers(TokenList, 401))
async def list_tokens(principal: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    """The caller's API tokens, oldest first (never their secrets)."""
    rows = await tokens.list_tokens(db, principal.user.id)
    return {"tokens": [tokens.token_view(row) for row in rows]}


@router.post(
    "/tokens",
    **answers(NewToken, 400, 401, 413, status=201, write=True),
    openapi_extra=json_body(TokenCreate),
)
async def create_token(request: Request, principal: CurrentUser, db: DatabaseDep) -> JSONResponse:
    """A new API token; its secret is in this answer and nowhere else, ever."""
    body = await read_model(request, TokenCreate)
    token, secret = await tokens.add_token(db, principal.user.id, body.label)
    return JSONResponse({"token": tokens.token_view(token), "secret": secret}, status_code=201)


@router.delete("/tokens/{token_id}", **answers(Success, 401, 404, write=True))
async def revoke_token(token_id: str, principal: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    """Revoke one of the caller's tokens (another user's is answered as unknown)."""
    if not await tokens.revoke_token(db, token_id, user_id=principal.user.id):
        raise ApiError(404, TOKEN_NOT_FOUND)
    return {"success": True}


@router.post(
    "/password",
    **answers(Success, 400, 401, 413, write=True),
    openapi_extra=json_body(PasswordChange),
)
async def change_password(
    request: Request, principal: CurrentUser, db: DatabaseDep
) -> dict[str, Any]:
    """Change the caller's password; every other session of theirs ends."""
    body = await read_model(request, PasswordChange)
    try:
        await users.change_own_password(
            db,
            principal.user.id,
            body.currentPassword,
            body.newPassword,
            keep_session=principal.session_id,
        )
    except users.WrongPasswordError as exc:
        raise ApiError(400, "Validation failed", details=[WRONG_PASSWORD]) from exc
    except users.NotFoundError as exc:
        raise ApiError(401, "Unauthorized") from exc
    return {"success": True}
