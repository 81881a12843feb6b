"""What every CRM tool shares: schema pieces, the declaring decorator, errors, time helpers.

A tool is declared next to its handler:

    @crm_tool("contacts_get-contact", "get-contact", what="contact", description=..., schema=...)
    async def get_contact(crm: CrmClient, args: dict[str, Any]) -> Any: ...

The second argument is the operationId of HighLevel's OpenAPI description
(GoHighLevel/highlevel-api-docs, apps/<app>.json) that the handler calls; the request it sends
is the one that operation declares, and `OPERATION_IDS` keeps the pairing for tests and docs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from controlcenter.crm.client import CrmClient, segment
from controlcenter.crm.errors import (
    CrmAuthError,
    CrmError,
    CrmNotFound,
    CrmRateLimited,
    CrmRequestError,
    CrmUnavailable,
)
from controlcenter.tools.base import Tool, ToolContext, ToolError

NOT_CONNECTED = (
    "The CRM is not connected for this user: no CRM location is linked to the account, or "
    "the CRM agency credentials are not configured. Ask an administrator to link the "
    "user's CRM sub-account and set the CRM agency settings."
)

Run = Callable[[CrmClient, dict[str, Any]], Awaitable[Any]]

OPERATION_IDS: dict[str, str] = {}  # tool name -> the HighLevel operationId it calls


# -- schema pieces -------------------------------------------------------------------------


def id_arg(what: str) -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "pattern": "^[A-Za-z0-9_-]+$",
        "description": f"The {what} id, as returned by the CRM.",
    }


def text(description: str, max_length: int = 1000) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length, "description": description}


def limit(default: int, maximum: int = 100) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "description": f"How many records to return (default {default}, at most {maximum}).",
    }


OFFSET = {"type": "integer", "minimum": 0, "description": "How many records to skip (paging)."}
DATE_TIME = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 date-time, e.g. 2026-05-01T09:00:00Z (UTC when no offset).",
}
DAY = {
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2}$",
    "description": "A date, YYYY-MM-DD.",
}


def schema(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """A closed object schema. No top-level anyOf/oneOf/allOf: several providers refuse them
    in a tool's input schema, so "one of these is needed" rules live in the handlers."""
    closed: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }
    closed.update(extra)
    return closed


def by_id(field: str, what: str) -> dict[str, Any]:
    """The schema of a tool that takes one id and nothing else."""
    return schema({field: id_arg(what)}, [field])


@dataclass(frozen=True)
class Paging:
    """A list's `limit` (and `offset`): the default is stated once, for the schema the model
    reads and for the request the handler sends."""

    default: int
    offset: bool = False

    @property
    def schema(self) -> dict[str, Any]:
        return {"limit": limit(self.default), **({"offset": OFFSET} if self.offset else {})}

    def limit(self, args: Mapping[str, Any]) -> int:
        value: int = args.get("limit", self.default)
        return value

    def params(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """`limit` and `offset` as the request sends them (both, when the operation pages)."""
        if not self.offset:
            return {"limit": self.limit(args)}
        return {"limit": self.limit(args), "offset": args.get("offset", 0)}


_FIELD = re.compile(r"{(\w+)}")


def path(template: str, args: Mapping[str, Any]) -> str:
    """`template` with each `{name}` filled by `args[name]` as one escaped path segment, so
    an id from a model never walks to another path."""
    return template.format_map({name: segment(args[name]) for name in _FIELD.findall(template)})


def pick(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: args[name] for name in names if name in args}


def require_one(args: dict[str, Any], *names: str, why: str) -> None:
    """The rule a top-level anyOf would state, said to the model in words."""
    if not any(name in args for name in names):
        raise ToolError(why)


# -- declaring a tool ------------------------------------------------------------------------


def crm_tool(
    name: str, operation_id: str, *, what: str, description: str, schema: dict[str, Any]
) -> Callable[[Run], Tool]:
    """Declare `run` as the tool `name`, which calls HighLevel's `operation_id`."""

    def declare(run: Run) -> Tool:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
            crm = ctx.crm
            if not isinstance(crm, CrmClient):
                raise ToolError(NOT_CONNECTED)
            try:
                return await run(crm, args)
            except CrmError as exc:
                raise tool_error(exc, what) from exc

        OPERATION_IDS[name] = operation_id
        return Tool(name=name, description=description, input_schema=schema, handler=handler)

    return declare


def tool_error(exc: CrmError, what: str) -> ToolError:
    """A message the model can act on; the API's own words where they help."""
    if isinstance(exc, CrmRateLimited):
        return ToolError("CRM rate limit reached; try again in a minute.")
    if isinstance(exc, CrmUnavailable):
        return ToolError("The CRM is not reachable right now; try again later.")
    if isinstance(exc, CrmAuthError) and exc.status == 403:
        return ToolError(f"That {what} is not in this user's CRM account, so it cannot be used.")
    if isinstance(exc, CrmAuthError):
        return ToolError(
            "The CRM refused the credentials; ask an administrator to check the CRM settings."
        )
    if isinstance(exc, CrmNotFound):
        message = exc.message.rstrip(". ") or f"{what.capitalize()} not found"
        return ToolError(f"{message}.")
    if isinstance(exc, CrmRequestError):
        return ToolError(f"The CRM refused the request: {exc.message}")
    return ToolError(f"CRM error: {exc.message}")


# -- time ------------------------------------------------------------------------------------


def now() -> datetime:
    return datetime.now(UTC)


def moment(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ToolError(
            f"{name} must be an ISO 8601 date-time, e.g. 2026-05-01T09:00:00Z."
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ToolError(f"{name} must be a date, YYYY-MM-DD.") from exc


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)
