"""GET and POST /api/v1/onboarding."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from controlcenter.auth.deps import CurrentUser
from controlcenter.common.logs import get_logger
from controlcenter.onboarding import service
from controlcenter.onboarding.deps import OnboardingSavesDep
from controlcenter.onboarding.schemas import (
    ONBOARDING_INPUT,
    OnboardingAnswer,
    SavedOnboarding,
    record,
)
from controlcenter.web.body import parse_json
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError, InvalidJSONError, describe
from controlcenter.web.openapi_doc import answers, json_body
from controlcenter.web.validation import issues

router = APIRouter(prefix="/api/v1", tags=["onboarding"])
log = get_logger(__name__)

SAVE_FAILED = "Failed to save onboarding"


@router.get("/onboarding", **answers(OnboardingAnswer, 401))
async def get_onboarding(principal: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    row = await service.get_onboarding(db, principal.user.id)
    return {"onboarding": record(row) if row is not None else None}


# The body is read by hand: an unparseable one is a 500, not FastAPI's 422.
@router.post(
    "/onboarding",
    **answers(SavedOnboarding, 400, 401, 413, 500, write=True),
    openapi_extra=json_body(ONBOARDING_INPUT),
)
async def save_onboarding(
    request: Request, principal: CurrentUser, saves: OnboardingSavesDep
) -> dict[str, Any]:
    user_id = principal.user.id
    try:
        body = parse_json(await request.body())
    except InvalidJSONError as exc:
        # An unparseable body is one of the save's failures, all answered with 500.
        raise ApiError(500, SAVE_FAILED) from exc
    try:
        data = ONBOARDING_INPUT.validate_python(body)
    except ValidationError as exc:
        raise ApiError(400, "Validation failed", details=issues(exc)) from exc
    try:
        row = await saves.save(user_id, data)
    except service.UserGoneError as exc:
        raise ApiError(401, "Unauthorized") from exc
    except Exception as exc:
        log.error("saving onboarding failed", user_id=user_id, error=describe(exc))
        raise ApiError(500, SAVE_FAILED) from exc
    return {"success": True, "onboarding": record(row)}
