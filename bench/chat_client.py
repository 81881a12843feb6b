"""The chat load: N concurrent chats from one client process with httpx + httpx-sse.

    python -m bench.chat_client --url URL --tokens FILE --chats N --out FILE [--rate R]
        [--message TEXT] [--tools N] [--per-pool N] [--uvloop] [--raw]

Each chat is one POST with its own stream, sent by a task of its own. Closed loop (no --rate):
all start together. Open loop (--rate R): one starts every 1/R s, whether or not the earlier
ones have finished, as independent users arrive. Written to --out: one record per chat with
monotonic timestamps (comparable across processes on Linux), so the caller can line them up
with its memory samples.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import uvloop
from httpx_sse import aconnect_sse

CHAT_PATH = "/api/v1/control-center/chat"
EXPECTED_TOOL_CALLS = 2
DEFAULT_MESSAGE = "Bench chat: what is new?"
CHATS_PER_POOL = 100


async def one_chat(
    http: httpx.AsyncClient,
    token: str,
    index: int,
    message: str,
    tools: int,
    record: dict[str, Any],
) -> None:
    """Fills `record` as the chat goes (the caller keeps it if the chat is cancelled)."""
    record.update(start=time.monotonic(), error=None)
    body = {"message": f"{message} (chat {index})", "provider": "provider_a"}
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with aconnect_sse(http, "POST", CHAT_PATH, json=body, headers=headers) as source:
            record["headers"] = time.monotonic()
            if source.response.status_code != 200:
                await source.response.aread()
                record["error"] = f"HTTP {source.response.status_code}"
                return
            async for event in source.aiter_sse():
                if _event(json.loads(event.data), tools, record):
                    return
        _ended(record)
    except Exception as exc:  # every failure is a figure of the run, not a crash
        _failed(record, exc)


async def one_raw_chat(
    address: tuple[str, int],
    token: str,
    index: int,
    message: str,
    tools: int,
    record: dict[str, Any],
) -> None:
    """`one_chat` on a socket of its own, HTTP/1.1 and SSE read by hand: the held streams'
    client, whose CPU shares the two cores with the service and paces the 10,000 streams'
    ramp and ends (httpx and httpx-sse: ~3 ms per stream)."""
    record.update(start=time.monotonic(), error=None)
    host, port = address
    body = json.dumps({"message": f"{message} (chat {index})", "provider": "provider_a"})
    request = (
        f"POST {CHAT_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n{body}"
    ).encode()
    writer: asyncio.StreamWriter | None = None
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        record["headers"] = time.monotonic()
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            record["error"] = f"HTTP {status}"
            return
        if b"transfer-encoding: chunked" not in head.lower():
            raise RuntimeError("expected a chunked SSE response")
        pending = b""
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            pending += (await reader.readexactly(size + 2))[:-2]
            *frames, pending = pending.split(b"\n\n")
            for frame in frames:
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: ") and _event(json.loads(line[6:]), tools, record):
                        return
        _ended(record)
    except Exception as exc:
        _failed(record, exc)
    finally:
        if writer is not None:
            writer.close()


def _ended(record: dict[str, Any]) -> None:
    """The stream ended: it must have carried message_complete."""
    record["end"] = time.monotonic()
    if "complete" not in record and record["error"] is None:
        record["error"] = "stream ended without message_complete"


def _failed(record: dict[str, Any], exc: Exception) -> None:
    record["error"] = f"{type(exc).__name__}: {exc}"[:200]
    record["end"] = time.monotonic()


def _event(data: dict[str, Any], tools: int, record: dict[str, Any]) -> bool:
    """One event into `record`, as `one_chat` reads it; True when the chat ends on it."""
    kind = data.get("type")
    if kind == "message_start":
        record["message_start"] = time.monotonic()
    elif kind == "error":
        record["error"] = f"error event: {data.get('error')}"
        record["end"] = time.monotonic()
        return True
    elif kind == "message_complete":
        record["complete"] = time.monotonic()
        results = data["message"].get("toolResults") or []
        if len(results) != tools or not all(r.get("success") for r in results):
            record["error"] = f"tool results: {results!r}"[:200]
    return False


async def run(
    url: str,
    tokens: list[str],
    chats: int,
    limit_s: float,
    *,
    rate: float | None = None,
    message: str = DEFAULT_MESSAGE,
    tools: int = EXPECTED_TOOL_CALLS,
    per_pool: int = CHATS_PER_POOL,
    raw: bool = False,
    give_up: GiveUp | None = None,
) -> list[dict[str, Any]]:
    """With `give_up` (open loop), no chat starts once the run's verdict is a miss; the chats
    under way finish, the others' records stay empty."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    # One pool per `per_pool` chats: httpcore's pool walks all its connections on every
    # request and every response's end, so one pool of 10,000 streams spends this process's CPU
    # (two cores shared with the service) on that walk, and half the streams are never sent.
    # One TLS context for all (unused on 127.0.0.1): each pool loading the CA bundle again takes
    # ~0.3 s of a loaded machine, a minute for 100 pools before the first chat.
    tls = ssl.create_default_context()
    pools = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=limit_s, verify=tls)
        for _ in range(1 if raw else max(1, -(-chats // per_pool)))
    ]
    async with contextlib.AsyncExitStack() as stack:
        for pool in pools:
            await stack.enter_async_context(pool)
        # This process's first request pays for its own start (lazy imports, the first
        # connection): about 40 ms that a single chat's message_start counted as the service's.
        await pools[0].get("/healthz")
        tasks = []
        address = (httpx.URL(url).host, httpx.URL(url).port or 80)
        records: list[dict[str, Any]] = [{} for _ in range(chats)]
        first = time.monotonic()
        for i in range(chats):
            if rate is not None:  # the i-th arrival at its time, late ones at once
                await asyncio.sleep(max(0.0, first + i / rate - time.monotonic()))
            if give_up is not None and give_up.decided:
                break
            token = tokens[i % len(tokens)]
            chat = (
                one_raw_chat(address, token, i, message, tools, records[i])
                if raw
                else one_chat(pools[i // per_pool], token, i, message, tools, records[i])
            )
            task = asyncio.create_task(chat)
            if give_up is not None:
                task.add_done_callback(partial(give_up.count, records[i]))
            tasks.append(task)
        _, late = await asyncio.wait(tasks, timeout=limit_s)
        for task in late:
            task.cancel()
        if late:  # ended before the pools close, which would make each of them a ReadError
            await asyncio.wait(late)
        for task, record in zip(tasks, records, strict=False):
            if task in late:  # what it reached stays: a stream open at the end was open all along
                record["error"] = f"not done after {limit_s}s"
        return records


@dataclass
class GiveUp:
    """An open-loop run's verdict, decided before its end: a chat with an error, or `over`
    chats slower than `limit_s` (as many as put its p99 over the limit whatever the others
    do). Starting the rest would only repeat it for up to a minute."""

    over: int
    limit_s: float
    slow: int = 0
    decided: bool = False

    def count(self, record: dict[str, Any], _: object) -> None:
        if record.get("error"):
            self.decided = True
        elif record.get("complete", float("inf")) - record.get("start", 0.0) > self.limit_s:
            self.slow += 1
            self.decided = self.decided or self.slow >= self.over


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--tokens", required=True, help="JSON list of session JWTs")
    parser.add_argument("--chats", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rate", type=float, help="open loop: chats started per second")
    parser.add_argument("--message", default=DEFAULT_MESSAGE)
    parser.add_argument("--tools", type=int, default=EXPECTED_TOOL_CALLS, help="tool results")
    parser.add_argument("--per-pool", type=int, default=CHATS_PER_POOL, help="chats per pool")
    parser.add_argument("--uvloop", action="store_true", help="uvloop's event loop")
    parser.add_argument("--raw", action="store_true", help="HTTP and SSE read by hand")
    parser.add_argument(
        "--give-up", nargs=2, type=float, metavar=("OVER", "LIMIT_S"),
        help="open loop: start no more chats once one fails or OVER take longer than LIMIT_S",
    )  # fmt: skip
    args = parser.parse_args()
    tokens = json.loads(Path(args.tokens).read_text())
    if args.uvloop:
        uvloop.install()
    records = asyncio.run(
        run(
            args.url,
            tokens,
            args.chats,
            args.timeout,
            rate=args.rate,
            message=args.message,
            tools=args.tools,
            per_pool=args.per_pool,
            raw=args.raw,
            give_up=GiveUp(int(args.give_up[0]), args.give_up[1]) if args.give_up else None,
        )
    )
    Path(args.out).write_text(json.dumps(records))


if __name__ == "__main__":
    main()
