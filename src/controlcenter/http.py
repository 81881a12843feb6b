"""Request-body helpers shared by the routers."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from controlcenter.errors import InvalidJSONError


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
