"""GET and PUT /api/v1/admin/settings: super administrators only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError

from controlcenter.admin_settings import service
from controlcenter.admin_settings.deps import SettingsDep
from controlcenter.admin_settings.schemas import SettingsAnswer, SettingsInput, parse_settings
from controlcenter.auth.deps import SuperAdmin
from controlcenter.common.logs import get_logger
from controlcenter.web.body import read_json
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError, InvalidJSONError, describe
from controlcenter.web.openapi_doc import Success, answers, json_body
from controlcenter.web.validation import issues

router = APIRouter(prefix="/api/v1/admin", tags=["settings"])
log = get_logger(__name__)

FETCH_FAILED = "Failed to fetch settings"
UPDATE_FAILED = "Failed to update settings"
UNKNOWN_SETTING = "Unknown setting"


@router.get("/settings", **answers(SettingsAnswer, 403, 500))
async def get_settings(principal: SuperAdmin, store: SettingsDep) -> dict[str, Any]:
    try:
        settings = await service.masked_settings(store)
    except Exception as exc:
        # Typically SettingsDecryptError (the key changed): it names the setting, not its value.
        log.error("reading settings failed", error=describe(exc))
        raise ApiError(500, FETCH_FAILED) from exc
    return {"settings": settings}


# The body is read by hand: an unparseable one is a 500, not FastAPI's 422.
@router.put(
    "/settings",
    **answers(Success, 400, 403, 413, 500, write=True),
    openapi_extra=json_body(SettingsInput),
)
async def put_settings(
    request: Request, principal: SuperAdmin, db: DatabaseDep, settings: SettingsDep
) -> dict[str, Any]:
    try:
        values = parse_settings(await read_json(request))
    except InvalidJSONError as exc:
        raise ApiError(500, UPDATE_FAILED) from exc
    except ValidationError as exc:
        raise ApiError(400, "Validation failed", details=issues(exc)) from exc
    try:
        await service.update_settings(db, settings, values, principal.user.id)
    except Exception as exc:
        log.error("saving settings failed", user_id=principal.user.id, error=describe(exc))
        raise ApiError(500, UPDATE_FAILED) from exc
    return {"success": True}


@router.delete("/settings/{name}", **answers(Success, 403, 404, 500, write=True))
async def delete_setting(
    name: str, principal: SuperAdmin, db: DatabaseDep, settings: SettingsDep
) -> dict[str, Any]:
    """Clear one setting: PUT cannot, since it drops empty values."""
    try:
        await service.clear_setting(db, settings, name)
    except service.UnknownSettingError as exc:
        raise ApiError(404, UNKNOWN_SETTING) from exc
    except Exception as exc:
        log.error("clearing a setting failed", user_id=principal.user.id, error=describe(exc))
        raise ApiError(500, UPDATE_FAILED) from exc
    log.info("setting cleared", setting=name, user_id=principal.user.id)
    return {"success": True}
