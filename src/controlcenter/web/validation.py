"""Building blocks shared by the strict request schemas of the routers."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError
from pydantic_core import PydanticCustomError


def text_problem(value: str) -> dict[str, str] | None:
    """Why `value` is not text every supported database stores as it is, or None.

    JSON escapes can smuggle in such text (a lone surrogate is not UTF-8, PostgreSQL refuses
    NUL): it is refused as bad input instead of failing at the database.
    """
    if "\x00" in value:
        return {"message": "String must not contain NUL characters", "type": "string_nul"}
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return {"message": "String must be valid Unicode text", "type": "string_unicode"}
    return None


def _storable(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise PydanticCustomError(problem["type"], problem["message"])
    return value


STORABLE = AfterValidator(_storable)
"""The check of `StoredStr`, to follow a `StringConstraints` on `str` (after it, pydantic's own
string messages: `String should have at most N characters`)."""
StoredStr = Annotated[str, STORABLE]
"""A string that every supported database can store as it is."""


def issues(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors as `details` entries `{path, message, type}`.

    The offending input is left out on purpose: it may be a secret.
    """
    return [
        {"path": list(error["loc"]), "message": error["msg"], "type": error["type"]}
        for error in exc.errors(include_url=False, include_input=False, include_context=False)
    ]
