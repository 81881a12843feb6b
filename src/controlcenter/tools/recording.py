"""What the toolbox tells the ledger of writes: a write about to run, then how it ended.

The ledger itself (`activity.ledger`) lives above the tools; the app hands it to the router, so
the tools never import it."""

from __future__ import annotations

from typing import Protocol

from controlcenter.llm.types import ToolInvocation, ToolOutcome
from controlcenter.tools.base import Tool, ToolContext


class WriteRecord(Protocol):
    async def finish(self, outcome: ToolOutcome) -> None:
        """Store how the write ended (a chat's call: with its run's next events, see
        `ToolContext.run`); never raises."""
        ...


class WriteRecorder(Protocol):
    async def begin(
        self, tool: Tool, call: ToolInvocation, context: ToolContext
    ) -> WriteRecord | None:
        """Store the write as under way, before it runs (with what it is about to change, when
        that can be read); None when it is not recorded (no conversation). Never raises."""
        ...
