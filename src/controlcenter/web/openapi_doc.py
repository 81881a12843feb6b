"""How a route describes itself in /openapi.json (docs/openapi.md).

FastAPI builds the whole document from the routes: each one names its success model, its
refusals and its request body with the helpers here, and the caller's security comes from the
dependencies that read it (`auth/deps.py`). Nothing is added to the document afterwards.

The models are documentation: routes keep `response_model=None` and return their dicts, so no
answer is validated or re-serialised on its way out. Most routes read their bodies by hand (bad
JSON gets the API's documented answers, never FastAPI's 422), which is why the body is given as
`openapi_extra` (FastAPI's documented way for a body it does not parse).
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

_STATUS_TEXT = {
    400: "Invalid JSON body, or `Validation failed` with `details`",
    401: "Unauthorized: no valid session",
    403: "Forbidden: the caller's role may not do this, or a cross-origin request with the "
    "session cookie (`Cross-origin request refused`)",
    404: "Not found",
    409: "Conflict",
    422: "The request is understood but cannot be carried out",
    413: "Request body too large",
    429: "Too many attempts, or the monthly token quota is used up",
    500: "The operation failed",
    502: "A remote system (the CRM) could not be reached or refused",
    503: "Not ready",
}
_OTHER_REFUSALS = "Any other refusal (for example a query parameter out of range), same body"


def schema_extra(example: Any, *, rules: JsonDict | None = None, **config: Any) -> ConfigDict:
    """A model's config (`config`) carrying its example into the document, and `rules`: JSON
    Schema keywords for what no single field can say (`allOf` of fields that go together)."""
    return cast(ConfigDict, {"json_schema_extra": {"example": example, **(rules or {})}, **config})


def _no_null_default(schema: JsonDict) -> None:
    schema.pop("default", None)


def absent(description: str | None = None) -> Any:
    """A field that is left out when it has no value (never sent as null)."""
    return Field(default=None, description=description, json_schema_extra=_no_null_default)


class Issue(BaseModel):
    """One wrong field of a `Validation failed` answer."""

    model_config = schema_extra(
        {
            "path": ["usingOtherCrm"],
            "message": "Input should be a valid boolean",
            "type": "bool_type",
        }
    )
    path: list[str | int]
    message: str
    type: str


class Error(BaseModel):
    """Every refusal: the reason, and for validation each wrong field."""

    model_config = schema_extra({"error": "Unauthorized"})
    error: str
    details: list[Issue] = absent()


class Success(BaseModel):
    model_config = schema_extra({"success": True})
    success: Literal[True]


class EventStream(StreamingResponse):
    """The type of a server-sent event stream (the routes set the header in full themselves)."""

    media_type = "text/event-stream"


def _error(code: int | str, description: str, *, by_ref: bool) -> dict[str, Any]:
    if by_ref:  # under a stream's route FastAPI would file a model under text/event-stream
        content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        return {"description": description, "content": content}
    return {"description": description, "model": Error}


def answers(
    model: type[BaseModel] | None,
    *refusals: int,
    status: int = 200,
    write: bool = False,
    stream: str | None = None,
    example: Any = None,
    description: str = "Success",
) -> dict[str, Any]:
    """A route decorator's keyword arguments for its answers.

    `model`: the success body's schema (with `stream`, the schema of one event, and `stream`
    the description of the stream). `refusals`: the statuses it refuses with, each an `Error`.
    `write`: a state-changing route, which a cross-origin request with the session cookie may
    meet (403). A `4XX` entry covers the rest, and keeps FastAPI's 422 out: the service never
    answers it."""
    success: dict[str, Any] = {"description": stream or description}
    media: dict[str, Any] = {}
    if model is not None:
        success["model"] = model
    if stream is not None:
        # FastAPI starts a stream's schema as `{"type": "string"}` and merges the model's $ref
        # into it; one event is an object (its `data` line), which this says instead.
        media["schema"] = {"type": "object"}
    if example is not None:
        media["example"] = example
    if media:
        success["content"] = {"text/event-stream" if stream else "application/json": media}
    codes = sorted({*refusals, *((403,) if write else ())})
    responses: dict[int | str, dict[str, Any]] = {status: success}
    for code in codes:
        responses[code] = _error(code, _STATUS_TEXT[code], by_ref=stream is not None)
    responses["4XX"] = _error("4XX", _OTHER_REFUSALS, by_ref=stream is not None)
    kwargs: dict[str, Any] = {"status_code": status, "response_model": None}
    if stream is not None:
        kwargs["response_class"] = EventStream
    return {**kwargs, "responses": responses}


NO_NUL = "^[^\\u0000]*$"
"""The body reader's text rule (`web/body.parse_json`: no string or key of a body holds NUL)
as a JSON Schema pattern. A lone surrogate, refused as well, cannot be named portably by a
pattern: `TEXT_RULE`, every body's description, states both."""
TEXT_RULE = (
    "No string or key anywhere in the body, in an open object's extra keys too, may hold NUL "
    "(U+0000) or an unpaired surrogate (`\\ud800`-`\\udfff` escaped alone), and an integer "
    "is written without a fraction part (`1000`, not `1000.0`): such a body is refused with 400."
)


def _state_text_rule(schema: Any) -> None:
    """Every string and every key of the body schema follows `NO_NUL`, as the reader demands."""
    if isinstance(schema, list):
        for item in schema:
            _state_text_rule(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "enum", "const"} & schema.keys():
        schema["pattern"] = NO_NUL
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        schema.setdefault("propertyNames", {"pattern": NO_NUL})
    for key, value in schema.items():
        if key not in ("example", "examples", "default", "propertyNames"):
            _state_text_rule(value)


def json_body(model: Any, *, optional: bool = False) -> dict[str, Any]:
    """`openapi_extra` for a body the route reads by hand (`web/body.read_model`): the model's
    schema inline, under its title, which generated clients name it by, with the reader's text
    rule stated. `model`: a pydantic model or a TypeAdapter."""
    schema = model.json_schema() if hasattr(model, "json_schema") else model.model_json_schema()
    # A `$defs` entry would be looked up at the document's root, where it is not.
    assert "$defs" not in schema, f"{schema.get('title')}: nested models are not inlined"
    _state_text_rule(schema)
    content = {"application/json": {"schema": schema}}
    body = {"description": TEXT_RULE, "required": not optional, "content": content}
    return {"requestBody": body}


def operation_id(route: Any) -> str:
    """`list_users` → `listUsers`: short, stable names for generated clients."""
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), route.name)
