"""The tool router: one registry that tool sources add to, the order and cut of the tools offered,
provider-safe names and execution that always ends in a ToolOutcome.

A chat asks the router for a `Toolbox` once, before its loop: the tools offered to the provider
and everything needed to run the calls that come back. Toolboxes are memoised while no source
changes its list, so a thousand concurrent chats share one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from controlcenter.common.logs import get_logger
from controlcenter.llm.types import ToolInvocation, ToolOutcome, ToolSpec
from controlcenter.tools.base import Settings, Tool, ToolContext, ToolError
from controlcenter.tools.recording import WriteRecorder
from controlcenter.tools.schema import combinator_rule, offered_schema

log = get_logger(__name__)

MAX_TOOLS = 128  # tools offered to a provider at most
PRIORITY_PREFIXES = ("contact", "conversation", "opportunity", "calendar", "email", "location")
_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class ToolSource(Protocol):
    """Anything that contributes tools. A source that cannot list returns an empty list."""

    async def list_tools(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Sequence[Tool]:
        """`settings`: the chat's snapshot, for a source configured by them; None reads them.
        `location_id`: the CRM location of the broker the chat is for, None when he has none."""
        ...


class StaticSource:
    """A fixed list of tools, such as the built-in CRM catalogue."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = tuple(tools)

    async def list_tools(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Sequence[Tool]:
        return self._tools


def order_tools(tools: Sequence[Tool]) -> list[Tool]:
    """A stable partition into the tools whose lower-cased
    name starts with any priority prefix, then all others; cut at 128."""
    first = [t for t in tools if t.name.lower().startswith(PRIORITY_PREFIXES)]
    rest = [t for t in tools if not t.name.lower().startswith(PRIORITY_PREFIXES)]
    return (first + rest)[:MAX_TOOLS]


def provider_names(names: Sequence[str]) -> list[str]:
    """A name per tool that matches ^[A-Za-z0-9_-]{1,64}$ and is unique in the list.

    Valid names are kept as they are (and reserved first, so a sanitised name never takes a
    real one); others get invalid characters replaced by `_`, are cut to 64, and get a
    numeric suffix when that collides.
    """
    taken = {name for name in names if _VALID_NAME.match(name)}
    result: list[str] = []
    for name in names:
        if _VALID_NAME.match(name):
            result.append(name)
            continue
        base = _INVALID_CHARS.sub("_", name)[:_MAX_NAME] or "tool"
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            suffix = f"_{n}"
            candidate = base[: _MAX_NAME - len(suffix)] + suffix
        taken.add(candidate)
        result.append(candidate)
    return result


@dataclass
class _Entry:
    tool: Tool
    validator: Validator | None = field(default=None)
    validator_built: bool = False

    def check(self, arguments: dict[str, Any]) -> str | None:
        """The first schema violation as a message the model can act on, or None."""
        if not self.validator_built:
            self.validator_built = True
            try:
                cls = validator_for(self.tool.input_schema)
                cls.check_schema(self.tool.input_schema)
                self.validator = cls(self.tool.input_schema)
            except SchemaError:
                # A broken schema from a tool source: let the tool judge its own input.
                log.warning("tool has an invalid input schema", tool=self.tool.name)
        if self.validator is None:
            return None
        error = next(iter(self.validator.iter_errors(arguments)), None)
        if error is None:
            return None
        message = error.message
        if error.validator in ("anyOf", "oneOf", "allOf") and isinstance(
            error.validator_value, list
        ):
            # The default message quotes the arguments as a Python repr; say the rule instead.
            message = combinator_rule(str(error.validator), error.validator_value)
        where = "/".join(str(p) for p in error.absolute_path)
        return f"Invalid arguments: {message}" + (f" (at {where})" if where else "")


class Toolbox:
    """The tools of one chat: what the provider is offered, and how its calls are run."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        reported: set[str] | None = None,
        recorder: WriteRecorder | None = None,
    ) -> None:
        """`reported`: names already logged as not offered (kept by the router, so a source
        that relists its tools every few seconds does not repeat the warning). `recorder`: the
        ledger every call to a tool that writes is entered in."""
        self._recorder = recorder
        reported = set() if reported is None else reported
        schemas: dict[str, dict[str, Any]] = {}
        for tool in tools:
            schema = offered_schema(tool.input_schema)
            if schema is not None:
                schemas[tool.name] = schema
            elif tool.name not in reported:
                reported.add(tool.name)
                log.warning("tool not offered: its input schema accepts no object", tool=tool.name)
        ordered = order_tools([t for t in tools if t.name in schemas])
        names = provider_names([t.name for t in ordered])
        self.specs: tuple[ToolSpec, ...] = tuple(
            ToolSpec(name=n, description=t.description, input_schema=schemas[t.name])
            for n, t in zip(names, ordered, strict=True)
        )
        self._by_offered: dict[str, _Entry] = {
            n: _Entry(t) for n, t in zip(names, ordered, strict=True)
        }

    @property
    def tools(self) -> list[Tool]:
        """The offered tools as their sources listed them, in the order they are offered."""
        return [entry.tool for entry in self._by_offered.values()]

    def tool(self, offered_name: str) -> Tool | None:
        """The tool offered under `offered_name`, as its source listed it."""
        entry = self._by_offered.get(offered_name)
        return entry.tool if entry is not None else None

    def original(self, call: ToolInvocation) -> ToolInvocation:
        """The call as the user sees it: with the tool's real name, not the offered one."""
        entry = self._by_offered.get(call.name)
        if entry is None or entry.tool.name == call.name:
            return call
        return ToolInvocation(id=call.id, name=entry.tool.name, arguments=call.arguments)

    def writes(self, call: ToolInvocation) -> bool:
        """Whether the call is to a tool that may write; an unknown name runs
        nothing, so it needs no approval."""
        entry = self._by_offered.get(call.name)
        return entry is not None and not entry.tool.read_only

    async def execute(self, call: ToolInvocation, context: ToolContext) -> ToolOutcome:
        """Run one call; every failure becomes a failed ToolOutcome, never an exception.

        A call that writes and passed the argument check is entered in the ledger before it
        runs and finished there after, so a process that dies mid-write leaves it under way."""
        entry = self._by_offered.get(call.name)
        if entry is None:
            return ToolOutcome(call.id, False, error=f"Unknown tool: {call.name}")
        if not isinstance(call.arguments, dict):
            return ToolOutcome(call.id, False, error="Invalid arguments: expected a JSON object")
        problem = entry.check(call.arguments)
        if problem is not None:
            return ToolOutcome(call.id, False, error=problem)
        context = replace(context, tool_call_id=call.id)
        record = None
        if self._recorder is not None and self.writes(call):  # the writes tool approval asks about
            record = await self._recorder.begin(entry.tool, call, context)
        outcome = await self._run(entry, call, context)
        if record is not None:
            await record.finish(outcome)
        return outcome

    @staticmethod
    async def _run(entry: _Entry, call: ToolInvocation, context: ToolContext) -> ToolOutcome:
        try:
            result = await entry.tool.handler(call.arguments, context)
        except ToolError as exc:
            return ToolOutcome(call.id, False, error=str(exc) or "Tool failed")
        except Exception:
            log.exception("tool raised", tool=entry.tool.name, tool_call_id=call.id)
            return ToolOutcome(call.id, False, error=f"Tool {entry.tool.name} failed unexpectedly")
        return ToolOutcome(call.id, True, result=result)


class ToolRouter:
    """The registry. Sources are asked in the order they were added; on a name clash the
    earlier source keeps the name, so the built-in catalogue (added first) keeps its names and
    an MCP server's tool of the same name is offered qualified by the server (`_merge`)."""

    def __init__(
        self, sources: Sequence[ToolSource] = (), *, recorder: WriteRecorder | None = None
    ) -> None:
        """`recorder`: the ledger of writes (None: writes are not recorded)."""
        # In order; a toolbox is built again whenever what they list differs (`toolbox`).
        self.sources: list[ToolSource] = list(sources)
        self._recorder = recorder
        self._memo: tuple[tuple[Sequence[Tool], ...], Toolbox] | None = None
        self._not_offered: set[str] = set()

    async def aclose(self) -> None:
        """Close the sources that hold connections (at shutdown)."""
        for source in self.sources:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    async def toolbox(
        self, settings: Settings | None = None, *, location_id: str | None = None
    ) -> Toolbox:
        """The tools as the sources list them now; `settings`: the chat's snapshot,
        `location_id`: the broker's CRM location (None: none is linked)."""
        lists = tuple(
            [await source.list_tools(settings, location_id=location_id) for source in self.sources]
        )
        memo = self._memo
        if memo is not None and _same(memo[0], lists):
            return memo[1]
        box = Toolbox(
            _merge(lists, self._not_offered), reported=self._not_offered, recorder=self._recorder
        )
        self._memo = (lists, box)
        return box


def _same(old: Sequence[Sequence[Tool]], new: Sequence[Sequence[Tool]]) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


def _merge(lists: Sequence[Sequence[Tool]], reported: set[str] | None = None) -> list[Tool]:
    """One tool per name, first source first. A later tool whose name is taken keeps it
    qualified by its origin when it has one (an MCP server's `<server>_<tool>`, the server's
    name with characters outside A-Z, a-z, 0-9, `_` and `-` as `_`); a tool whose qualified name
    is taken too, or that has no origin, is not offered (logged once when `reported` is given)."""
    seen: set[str] = set()
    merged: list[Tool] = []
    for tools in lists:
        for tool in tools:
            if tool.name in seen and tool.origin:
                tool = replace(tool, name=f"{_INVALID_CHARS.sub('_', tool.origin)}_{tool.name}")
            if tool.name in seen:
                if reported is not None and tool.name not in reported:
                    reported.add(tool.name)
                    log.warning(
                        "tool not offered: an earlier source offers its name", tool=tool.name
                    )
                continue
            seen.add(tool.name)
            merged.append(tool)
    return merged
