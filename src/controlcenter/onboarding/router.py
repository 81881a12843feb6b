"""GET and POST /api/v1/onboarding (SPEC 4.3, 4.4; CONTRACT 2, 6)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from controlcenter.common.logs import get_logger
from controlcenter.onboarding import service
from controlcenter.onboarding.schemas import (
    ONBOARDING_INPUT,
    OnboardingAnswer,
    SavedOnboarding,
    record,
)
from controlcenter.onboarding.service import OnboardingSaves
from controlcenter.web.body import parse_json
from controlcenter.web.deps import CurrentUser, DatabaseDep, OnboardingSavesDep
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


# The body is read by hand: an unparseable one is a 500 (SPEC 4.4), not FastAPI's 422. POST is
# answered in front of the framework (`onboarding/fast_path.py`) unless tracing is on; this
# route declares it in /openapi.json and answers it then, both through `saved`.
@router.post(
    "/onboarding",
    **answers(SavedOnboarding, 400, 401, 413, 500, write=True),
    openapi_extra=json_body(ONBOARDING_INPUT),
)
async def save_onboarding(
    request: Request, principal: CurrentUser, saves: OnboardingSavesDep
) -> dict[str, Any]:
    return await saved(saves, principal.user.id, await request.body())


async def saved(saves: OnboardingSaves, user_id: str, raw: bytes) -> dict[str, Any]:
    """The answer to `user_id`'s POST of the body `raw` (SPEC 4.4); ApiError for a refusal."""
    try:
        body = parse_json(raw)
    except InvalidJSONError as exc:
        # SPEC 4.4 step 7 puts an unparseable body among the failures answered with 500.
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
