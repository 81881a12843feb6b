"""HTTP for the chat's administration: the chat policy (super administrators)
and the monthly usage report (administrators)."""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError

from controlcenter.admin_settings.deps import SettingsDep
from controlcenter.auth.deps import Admin, SuperAdmin
from controlcenter.chat.policy import CHAT_POLICY, ChatPolicyInput, changed_text, stored_policy
from controlcenter.chat.schemas import ChatPolicyAnswer, UsageReport
from controlcenter.chat.usage import usage_report
from controlcenter.db import utcnow
from controlcenter.web.body import read_object
from controlcenter.web.deps import DatabaseDep
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import answers, json_body
from controlcenter.web.validation import issues

router = APIRouter(prefix="/api/v1/admin", tags=["chat"])

# Years 1000-9999: four digits, none before the calendar Python can hold (year 0 would be a 500).
MONTH = re.compile(r"^([1-9][0-9]{3})-(0[1-9]|1[0-2])$")


@router.get("/chat-policy", **answers(ChatPolicyAnswer, 403))
async def get_chat_policy(principal: SuperAdmin, settings: SettingsDep) -> dict[str, Any]:
    return {"policy": stored_policy(await settings.get(CHAT_POLICY)).json()}


@router.put(
    "/chat-policy",
    **answers(ChatPolicyAnswer, 400, 403, 413, write=True),
    openapi_extra=json_body(ChatPolicyInput),
)
async def put_chat_policy(
    request: Request, principal: SuperAdmin, db: DatabaseDep, settings: SettingsDep
) -> dict[str, Any]:
    body = await read_object(request)
    try:
        given = ChatPolicyInput.model_validate(body)
    except ValidationError as exc:
        raise ApiError(400, "Validation failed", details=issues(exc)) from exc
    # Merged with the stored policy inside the write, not with the one this process keeps
    # (which may not have seen another process's change yet): two PUTs of different fields
    # both stand.
    stored = await db.run_write(
        settings.change, CHAT_POLICY, partial(changed_text, given), principal.user.id
    )
    return {"policy": stored_policy(stored).json()}


@router.get("/usage", **answers(UsageReport, 400, 403))
async def get_usage(
    principal: Admin,
    db: DatabaseDep,
    month: Annotated[str | None, Query(pattern=MONTH.pattern, description="YYYY-MM")] = None,
) -> dict[str, Any]:
    """Per user, the month's tokens in and out, chats and tool calls (UTC months)."""
    if month is None:
        now = utcnow()
        year, number = now.year, now.month
    else:
        found = MONTH.match(month)
        assert found is not None  # the query's pattern checked it
        year, number = int(found[1]), int(found[2])
    rows = await usage_report(db, year, number)
    return {"month": f"{year:04d}-{number:02d}", "users": [row.json() for row in rows]}
