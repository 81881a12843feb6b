"""Request-body helpers shared by the routers."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from controlcenter.errors import ApiError, InvalidJSONError
from controlcenter.validation import issues


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_json(request: Request) -> Any:
    """The parsed body, whatever the Content-Type (as the original handlers' `req.json()`).

    Raises InvalidJSONError for an empty body, invalid UTF-8, bad syntax or the non-standard
    NaN/Infinity literals that Python's parser would otherwise accept.
    """
    raw = await request.body()
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidJSONError from exc


M = TypeVar("M", bound=BaseModel)
NOT_AN_OBJECT = {"path": [], "message": "Input should be a JSON object", "type": "dict_type"}


async def read_model(request: Request, model: type[M], *, optional: bool = False) -> M:
    """The body validated against `model`: 400 `Invalid JSON body`, or 400 `Validation failed`
    with `details` naming each wrong field. `optional`: no body at all counts as `{}`."""
    if optional and not await request.body():
        return model.model_validate({})
    try:
        body = await read_json(request)
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "Validation failed", details=[NOT_AN_OBJECT])
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(400, "Validation failed", details=issues(exc)) from exc


def json_body(model: type[BaseModel], *, optional: bool = False) -> dict[str, Any]:
    """`openapi_extra` for a route that reads its body by hand (see `read_json`)."""
    return {
        "requestBody": {
            "required": not optional,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }
