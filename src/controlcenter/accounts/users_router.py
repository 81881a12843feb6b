"""/api/v1/admin/users: administrators and super administrators."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from controlcenter.accounts import users
from controlcenter.accounts.schemas import (
    ADMIN_USER_EXAMPLE,
    AdminUserAnswer,
    NewUser,
    PasswordReset,
    PasswordSet,
    UserCreate,
    UserPage,
    UserPatch,
)
from controlcenter.auth.deps import Admin
from controlcenter.auth.service import UserExistsError
from controlcenter.web.body import read_model
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import Success, answers, json_body
from controlcenter.web.pagination import CURSOR_PATTERN

router = APIRouter(prefix="/api/v1/admin/users", tags=["users"])

USER_NOT_FOUND = "User not found"
USER_EXISTS = "A user with this e-mail already exists"
FORBIDDEN = "Forbidden"
LIST_MAX = 200


_ANSWERS: dict[type[Exception], tuple[int, str]] = {
    users.NotFoundError: (404, USER_NOT_FOUND),
    users.ForbiddenError: (403, FORBIDDEN),
    users.LastSuperAdminError: (409, users.LAST_SUPER_ADMIN),
    UserExistsError: (409, USER_EXISTS),
}
REFUSALS = tuple(_ANSWERS)


def _refusal(exc: Exception) -> ApiError:
    """The answer for a refusal of the users service."""
    status, message = _ANSWERS[type(exc)]
    return ApiError(status, message)


@router.get(
    "",
    **answers(UserPage, 400, 403, example={"users": [ADMIN_USER_EXAMPLE], "nextCursor": None}),
)
async def list_users(
    principal: Admin,
    db: DatabaseDep,
    limit: Annotated[int, Query(ge=1, le=LIST_MAX)] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=1000,
            pattern=CURSOR_PATTERN,
            description="`nextCursor` of the previous page, as it came",
        ),
    ] = None,
) -> dict[str, Any]:
    """Every account, ordered by e-mail, a page at a time."""
    try:
        rows, next_cursor = await users.list_users(db, limit=limit, cursor=cursor)
    except users.BadCursorError as exc:
        detail = {"path": ["cursor"], "message": "Invalid cursor", "type": "cursor"}
        raise ApiError(400, "Validation failed", details=[detail]) from exc
    return {"users": [users.admin_view(row) for row in rows], "nextCursor": next_cursor}


@router.post(
    "",
    **answers(
        NewUser,
        400,
        403,
        409,
        413,
        status=201,
        write=True,
        example={"user": ADMIN_USER_EXAMPLE, "password": "f3Qz0rV1m7pX2sKc9LwYb8Tn"},
    ),
    openapi_extra=json_body(UserCreate),
)
async def create_user(request: Request, principal: Admin, db: DatabaseDep) -> JSONResponse:
    """Create an account; a generated password is returned once when none is given."""
    body = await read_model(request, UserCreate)
    try:
        user, generated = await users.add_user(
            db,
            actor_role=principal.user.role,
            email=body.email,
            name=body.name,
            role=body.role,
            password=body.password,
        )
    except REFUSALS as exc:
        raise _refusal(exc) from exc
    answer: dict[str, Any] = {"user": users.admin_view(user)}
    if generated is not None:
        answer["password"] = generated
    return JSONResponse(answer, status_code=201)


@router.patch(
    "/{user_id}",
    **answers(AdminUserAnswer, 400, 403, 404, 409, 413, write=True),
    openapi_extra=json_body(UserPatch),
)
async def update_user(
    user_id: str, request: Request, principal: Admin, db: DatabaseDep
) -> dict[str, Any]:
    """Rename, change the role, disable or enable, link or unlink a CRM location."""
    body = await read_model(request, UserPatch)
    # The body refuses null except for `crmLocationId` (null unlinks): every other field is
    # None exactly when it was not sent.
    location_sent = "crmLocationId" in body.model_fields_set
    changes = users.UserChanges(
        name=body.name,
        role=body.role,
        disabled=body.disabled,
        crm_location_id=(body.crmLocationId or "") if location_sent else None,
    )
    try:
        user = await users.update_user(db, user_id, changes, actor_role=principal.user.role)
    except REFUSALS as exc:
        raise _refusal(exc) from exc
    return {"user": users.admin_view(user)}


@router.post(
    "/{user_id}/password",
    **answers(PasswordSet, 400, 403, 404, 413, write=True),
    openapi_extra=json_body(PasswordReset, optional=True),
)
async def reset_password(
    user_id: str, request: Request, principal: Admin, db: DatabaseDep
) -> dict[str, Any]:
    """Set a new password (generated and returned once when none is given); the user's
    sessions end."""
    body = await read_model(request, PasswordReset, optional=True)
    try:
        generated = await users.reset_password(
            db, user_id, body.password, actor_role=principal.user.role
        )
    except REFUSALS as exc:
        raise _refusal(exc) from exc
    answer: dict[str, Any] = {"success": True}
    if generated is not None:
        answer["password"] = generated
    return answer


@router.delete("/{user_id}", **answers(Success, 403, 404, 409, write=True))
async def delete_user(user_id: str, principal: Admin, db: DatabaseDep) -> dict[str, Any]:
    """Remove the account with its sessions, tokens, conversations and onboarding record."""
    try:
        await users.delete_user(db, user_id, actor_role=principal.user.role)
    except REFUSALS as exc:
        raise _refusal(exc) from exc
    return {"success": True}
