"""Request-body helpers shared by the routers."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from controlcenter.web.errors import ApiError, InvalidJSONError, InvalidTextError
from controlcenter.web.validation import issues, text_problem


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def read_json(request: Request) -> Any:
    """The parsed body, whatever the Content-Type (as the original handlers' `req.json()`):
    `parse_json` of the body."""
    return parse_json(await request.body())


def parse_json(raw: bytes) -> Any:
    """A body parsed as JSON.

    Raises InvalidJSONError for an empty body, invalid UTF-8, bad syntax or the non-standard
    NaN/Infinity literals that Python's parser would otherwise accept; InvalidTextError for a
    string holding NUL or a lone surrogate.
    """
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidJSONError from exc
    # Valid UTF-8 cannot carry either (a raw control character is a syntax error already):
    # only a \u escape can, so a body without one is not walked.
    if b"\\u" in raw:
        try:
            problems = text_problems(body)
        except RecursionError as exc:  # nested as deep as the parser allows
            raise InvalidJSONError from exc
        if problems:
            raise InvalidTextError(problems)
    return body


def text_problems(value: Any, path: tuple[str | int, ...] = ()) -> list[dict[str, Any]]:
    """Every string (keys included) that is not storable text, as `details` entries."""
    if isinstance(value, str):
        problem = text_problem(value)
        return [] if problem is None else [{"path": list(path), **problem}]
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            problem = text_problem(key)
            if problem is not None:
                found.append({"path": list(path), **problem})
            found.extend(text_problems(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(text_problems(item, (*path, index)))
    return found


M = TypeVar("M", bound=BaseModel)
NOT_AN_OBJECT = {"path": [], "message": "Input should be a JSON object", "type": "dict_type"}


async def read_model(request: Request, model: type[M], *, optional: bool = False) -> M:
    """The body validated against `model`: 400 `Invalid JSON body`, or 400 `Validation failed`
    with `details` naming each wrong field. `optional`: no body at all counts as `{}`."""
    if optional and not await request.body():
        return model.model_validate({})
    body = await read_object(request)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(400, "Validation failed", details=issues(exc)) from exc


async def read_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object: 400 `Invalid JSON body`, or 400 `Validation failed` naming
    the whole body when it is JSON but not an object (for a body checked field by field)."""
    try:
        body = await read_json(request)
    except InvalidJSONError as exc:
        raise ApiError(400, "Invalid JSON body") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "Validation failed", details=[NOT_AN_OBJECT])
    return body
