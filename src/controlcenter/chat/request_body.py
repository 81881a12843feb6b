"""The chats' request bodies read with SPEC 4.2's errors (`/chat` and `/ui-chat` alike)."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from controlcenter.chat.schemas import INVALID_TEXT
from controlcenter.web.body import read_json
from controlcenter.web.errors import ApiError, InvalidJSONError, InvalidTextError


async def read_chat_body(request: Request) -> Any:
    try:
        return await read_json(request)
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    except InvalidTextError as exc:
        raise ApiError(400, INVALID_TEXT) from exc  # SPEC 4.2's errors are plain `{error}`
