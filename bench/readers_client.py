"""Idle readers of running answers: `held` chats whose provider holds its answer, then
`readers` connections to their events endpoint (spread evenly), each reading what is stored
and then waiting. Driven by files, so that the bench can measure between the steps:

    python -m bench.readers_client --url URL --token JWT --held 5 --readers 500 --dir DIR

writes DIR/held once the chats have started (their message ids), waits for SIGUSR1, opens the
readers, writes DIR/ready once every one has its response's headers and its first frame, and
holds them until it is stopped (SIGTERM). A reader that fails is counted in DIR/ready.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
from pathlib import Path

import httpx

from bench.fakes import LONG_HOLD_MARKER

CHAT_PATH = "/api/v1/control-center/chat"
HOLD_LIMIT_S = 900.0  # longer than any section holds the answers


class Readers:
    """How the readers fared; `settled` is set once each is open or failed."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.open = 0
        self.errors = 0
        self.settled = asyncio.Event()

    def opened(self, ok: bool) -> None:
        if ok:
            self.open += 1
        else:
            self.errors += 1
        if self.open + self.errors >= self.count:
            self.settled.set()


async def _held_chat(url: str, token: str, index: int, ids: list[str]) -> None:
    """One chat held by the provider: its message id, then its stream read until the end."""
    body = {"message": f"Bench readers {LONG_HOLD_MARKER} (chat {index})", "provider": "provider_a"}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=url, timeout=HOLD_LIMIT_S) as http,
        http.stream("POST", f"{CHAT_PATH}?ids=1", json=body, headers=headers) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event.get("type") == "message_start":
                    ids.append(event["messageId"])


async def _reader(address: tuple[str, int], token: str, message_id: str, readers: Readers) -> None:
    """A reader on a socket of its own (HTTP/1.1 by hand: 500 httpx streams would spend this
    process's CPU, which shares the cores with the service)."""
    host, port = address
    request = (
        f"GET {CHAT_PATH}/{message_id}/events?after=0 HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if int(head.split(b" ", 2)[1]) != 200:
            readers.opened(False)
            return
        await reader.readuntil(b"\n\n")  # message_start, stored with the run
    except Exception:
        readers.opened(False)
        return
    readers.opened(True)
    with contextlib.suppress(Exception):
        while await reader.read(65536):
            pass
    writer.close()


async def run(url: str, token: str, held: int, readers: int, out: Path) -> None:
    ids: list[str] = []
    chats = [asyncio.create_task(_held_chat(url, token, i, ids)) for i in range(held)]
    while len(ids) < held:
        if any(chat.done() for chat in chats):
            raise RuntimeError("a held chat ended before its message_start")
        await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    go, stop = asyncio.Event(), asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, go.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    (out / "held").write_text(json.dumps(ids))
    await go.wait()
    state = Readers(readers)
    address = (httpx.URL(url).host, httpx.URL(url).port or 80)
    started = time.monotonic()
    tasks = [
        asyncio.create_task(_reader(address, token, ids[i % held], state)) for i in range(readers)
    ]
    await state.settled.wait()
    ramp_s = round(time.monotonic() - started, 2)
    summary = {"open": state.open, "errors": state.errors, "ramp_s": ramp_s}
    (out / "ready").write_text(json.dumps(summary))
    await stop.wait()
    for task in [*tasks, *chats]:
        task.cancel()
    await asyncio.gather(*tasks, *chats, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.readers_client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--held", type=int, required=True)
    parser.add_argument("--readers", type=int, required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    asyncio.run(run(args.url, args.token, args.held, args.readers, Path(args.dir)))


if __name__ == "__main__":
    main()
