"""The floor under the service's CPU per chat step: what the libraries the service calls cost by
themselves for one step, called the way the service calls them, from this process.

- A provider call: the requests a lone chat of the chat section just sent (its three, as the fake
  provider received them: the system prompt, the tool list, the history) posted again with the
  `anthropic` SDK as the service's whole-answer call posts them (providers/anthropic.py): a
  client of the service's own `PooledClients` (the SDK's aiohttp transport with the service's
  pool limits, timeout and retries), the SDK's low-level `post` of the body in the service's
  two parts (`body.Parts`, its Content-Length in the request options), `cast_to` a raw
  response, the reply read as JSON. Against a fake provider of its own that answers at once
  (the chat's answers after 200 ms: calls back to back would take 200 ms each); this process's
  CPU only, the fake's is its own.
- A tool call: `call_tool` of the `mcp` client, with the tool names and arguments the chat's
  provider asked for, on one MCP session held open across calls by the service's own `Session`
  (a task of its own, as the service shares one session per server between every chat's
  calls), over an httpx2 client on the service's aiohttp transport and timeouts
  (tools/mcp/source.py), against the chat section's fake MCP server.

What the service adds above the libraries is left out: building the body (the messages' JSON),
reading the reply's fields, the metrics, the spans, the refusal hook on the MCP client's
responses, the timeouts around a call. After `WARM` calls of each, `ROUNDS` rounds, each a
batch of provider calls (the chat's three in turn) then a batch of tool calls (its two in
turn); a batch's figure is this process's CPU time (`time.process_time`) over it per call; the
floor is each kind's median round. A step of a lone chat is (3 provider calls + 2 tool calls)
/ 5, as the service's CPU per step is. The floor's calls follow each other at once, where a
lone chat's wait 200 ms for the provider: the floor is the libraries' cost with warm caches.

The floor's own requests are checked against the service's: the fake keeps the last three it
received, and their bytes and headers (but the address) must be the service's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

from bench.fakes import FakeProc, running
from bench.procs import per_call
from bench.results import Row, ms
from bench.timeline import step

if TYPE_CHECKING:
    from tests.fakes.llm import Received

    from controlcenter.providers.body import Parts

ROUNDS = 7
# Calls per round and kind (by --quick): multiples of the chat's three provider calls and two
# tool calls, so each round sends each of them as often. A call takes 2-6 ms of wall time (the
# fakes' work included; more on a busy machine), so the quick rounds take 1-4 s in all, and the
# rounds' figures stay within about 15% of each other.
PROVIDER_CALLS = {False: 90, True: 30}
TOOL_CALLS = {False: 60, True: 20}
WARM = 12  # unmeasured calls of each kind first: the connections, the SDK's lazy imports
# The service's MCP pool's limits (`McpSource._client`).
MCP_CONNECTIONS = 100


@dataclass(frozen=True)
class Floor:
    """CPU per call of each kind, by round; and how the floor's requests matched the chat's."""

    provider_s: list[float]
    tool_s: list[float]
    calls: tuple[int, int]  # per round: provider calls, tool calls
    chat: tuple[int, int]  # the lone chat's: provider calls, tool calls
    sizes: list[int]  # the lone chat's provider requests, bytes
    matched: str

    @property
    def provider(self) -> float:
        return median(self.provider_s)

    @property
    def tool(self) -> float:
        return median(self.tool_s)

    @property
    def step(self) -> float:
        """CPU per step of the lone chat's calls."""
        provider_calls, tool_calls = self.chat
        total = provider_calls * self.provider + tool_calls * self.tool
        return total / (provider_calls + tool_calls)


@dataclass(frozen=True)
class ChatSettings:
    """What the service was started with for the chat section (its environment)."""

    api_key: str
    timeout_s: float
    max_retries: int
    mcp_timeout_s: float


def measure(
    chat_llm: FakeProc, mcp_url: str, settings: ChatSettings, work: Path, quick: bool
) -> Floor:
    """The floor, from the lone chat the chat section ran last: its provider calls as the fake
    provider `chat_llm` received them."""
    sent = chat_llm.last_requests()
    tool_uses = _tool_uses(sent)
    floor_dir = work / "floor"
    floor_dir.mkdir(exist_ok=True)
    llm = FakeProc("llm", floor_dir, name="floor-llm")
    with running(llm):
        calls = (PROVIDER_CALLS[quick], TOOL_CALLS[quick])
        with step(f"chat step floor: {ROUNDS} rounds of {calls[0]} SDK and {calls[1]} MCP calls"):
            provider_s, tool_s = asyncio.run(
                _rounds(llm.info["url"], mcp_url, settings, sent, tool_uses, calls)
            )
        matched = _matched(sent, llm.last_requests())
    chat = (len(sent), len(tool_uses))
    return Floor(provider_s, tool_s, calls, chat, [len(r.body) for r in sent], matched)


def _tool_uses(sent: Sequence[Received]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the provider asked for in the chat, in order (the last request's history
    holds them all). Raises RuntimeError unless the requests are one chat's calls in turn, each
    history the last one's and the reply to it."""
    histories = [json.loads(r.body)["messages"] for r in sent]
    for before, after in itertools.pairwise(histories):
        if after[: len(before)] != before or len(after) != len(before) + 2:
            raise RuntimeError("the fake provider's last requests are not one chat's calls")
    uses = [
        (block["name"], block["input"])
        for message in histories[-1]
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    if not uses:
        raise RuntimeError("the chat's provider asked for no tool")
    return uses


def as_parts(body: bytes) -> Parts:
    """A provider call's body as the service sends it: its messages' part, then the tail shared
    by every call (`Body.around`), byte for byte the body received."""
    from controlcenter.providers.body import Body

    fields: dict[str, Any] = json.loads(body)
    keys = list(fields)
    at = keys.index("messages")
    before = {k: fields[k] for k in keys[:at]}
    after = {k: fields[k] for k in keys[at + 1 :]}
    parts = Body.around(before, after).with_messages(fields["messages"])
    if bytes(parts) != body:
        raise RuntimeError("the chat's provider request is not in the service's body parts")
    return parts


async def _rounds(
    llm_url: str,
    mcp_url: str,
    settings: ChatSettings,
    sent: Sequence[Received],
    tool_uses: Sequence[tuple[str, dict[str, Any]]],
    calls: tuple[int, int],
) -> tuple[list[float], list[float]]:
    # The SDKs and the service's modules are imported here, not with the bench: the sections
    # that do not use them start without them (seconds of imports on a busy machine).
    import anthropic
    import httpx2
    from httpx_aiohttp.httpx2 import AiohttpTransport
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    from controlcenter.providers.anthropic import PATH
    from controlcenter.providers.clients import PooledClients, shard_limits
    from controlcenter.tools.mcp.session import Refusals, Session

    tls = httpx2.create_ssl_context()
    clients = PooledClients(
        anthropic.AsyncAnthropic,
        lambda: anthropic.DefaultAioHttpClient(
            limits=shard_limits(), timeout=settings.timeout_s, verify=tls
        ),
        base_url=llm_url,
        timeout_s=settings.timeout_s,
        max_retries=settings.max_retries,
    )
    client = clients.get(settings.api_key)
    bodies = [as_parts(r.body) for r in sent]
    http = httpx2.AsyncClient(
        headers={},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=AiohttpTransport(
            limits=httpx2.Limits(
                max_connections=MCP_CONNECTIONS, max_keepalive_connections=MCP_CONNECTIONS
            )
        ),
    )
    session = Session(mcp_url, http, settings.mcp_timeout_s, Refusals())
    try:
        mcp = await session.client()
        posted = 0

        async def provider_call() -> None:
            nonlocal posted
            body = bodies[posted % len(bodies)]
            posted += 1
            raw = await client.post(
                PATH, cast_to=httpx2.Response, content=body, options={"headers": body.headers}
            )
            raw.json()

        called = 0

        async def tool_call() -> None:
            nonlocal called
            name, arguments = tool_uses[called % len(tool_uses)]
            called += 1
            result = await mcp.call_tool(name, arguments)
            if result.is_error:
                raise RuntimeError(f"the fake MCP server refused {name}")

        await per_call(provider_call, WARM)
        await per_call(tool_call, WARM)
        provider_s, tool_s = [], []
        for _ in range(ROUNDS):
            provider_s.append((await per_call(provider_call, calls[0]))[0])
            tool_s.append((await per_call(tool_call, calls[1]))[0])
        return provider_s, tool_s
    finally:
        await session.aclose()
        await http.aclose()
        await clients.aclose()


def _matched(service: Sequence[Received], floor: Sequence[Received]) -> str:
    """That the floor's last requests (the chat's three, in turn) are the service's: the same
    bytes, the same headers but the address. Raises RuntimeError when they are not (the floor
    would be another call's)."""
    if len(floor) != len(service):
        raise RuntimeError(f"the floor's fake kept {len(floor)} requests, not {len(service)}")
    bodies = sum(f.body == s.body for f, s in zip(floor, service, strict=True))
    differ = sorted(
        {
            name
            for f, s in zip(floor, service, strict=True)
            for name in f.headers.keys() | s.headers.keys()
            if name != "host" and f.headers.get(name) != s.headers.get(name)
        }
    )
    if bodies != len(service) or differ:
        raise RuntimeError(
            f"the floor's requests are not the chat's: {bodies} of {len(service)} bodies the "
            f"same, headers that differ: {', '.join(differ) or 'none'}"
        )
    return f"{bodies} of {len(service)} bodies byte for byte the chat's, the same headers but host"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def row(db: str, floor: Floor | str, service_step_s: float, target_s: float) -> Row:
    """The floor beside the service's CPU per step of the lone chats and the target; `floor`
    a string: why it was not measured."""
    measure = "chat step floor: the SDKs alone"
    if isinstance(floor, str):
        return Row(
            db, measure, "n/a", baseline=f"service x1 {ms(service_step_s)} per step", note=floor
        )
    per_step, (provider_calls, tool_calls) = floor.step, floor.chat

    def each(values: list[float]) -> str:
        return " ".join(f"{v * 1000:.2f}" for v in values)

    return Row(
        db,
        measure,
        f"anthropic SDK call {_ms(floor.provider)}, MCP tool call {_ms(floor.tool)}, a lone "
        f"chat's {provider_calls}+{tool_calls} of them {_ms(per_step)} per step",
        baseline=f"service x1 {ms(service_step_s)} per step",
        ratio=(
            f"service {service_step_s / per_step:.1f}x the floor; the target "
            f"({ms(target_s)} per step) {target_s / per_step:.2f}x it"
        ),
        note=(
            f"This process's CPU per call, median of {len(floor.provider_s)} interleaved rounds "
            f"of {floor.calls[0]} provider and {floor.calls[1]} tool calls (ms per call by "
            f"round: provider {each(floor.provider_s)}; tool {each(floor.tool_s)}); a step is "
            f"({provider_calls} + {tool_calls}) / "
            f"{provider_calls + tool_calls}. The chat's provider requests: "
            f"{', '.join(f'{n / 1024:.1f}' for n in floor.sizes)} KiB; the floor's: "
            f"{floor.matched}."
        ),
    )
