"""Building blocks shared by the strict request schemas of the routers."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ValidationError
from pydantic_core import PydanticCustomError


def _storable(value: str) -> str:
    # JSON escapes can smuggle in text no database accepts (a lone surrogate is not UTF-8,
    # PostgreSQL refuses NUL): refuse it as bad input instead of failing at the database.
    if "\x00" in value:
        raise PydanticCustomError("string_nul", "String must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("string_unicode", "String must be valid Unicode text") from None
    return value


StoredStr = Annotated[str, AfterValidator(_storable)]
"""A string that every supported database can store as it is."""


def issues(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors as `details` entries `{path, message, type}` (CONTRACT section 6).

    The offending input is left out on purpose: it may be a secret.
    """
    return [
        {"path": list(error["loc"]), "message": error["msg"], "type": error["type"]}
        for error in exc.errors(include_url=False, include_input=False, include_context=False)
    ]
