"""The protocol `controlcenter serve` runs (`web/server_protocol.py`): an answer's writes in
one turn of the loop reach the socket as one, and nothing is held back beyond that turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from controlcenter.cli.proxies import proxy_options
from controlcenter.web.server_protocol import CoalescedWrites, ServiceProtocol
from tests.fakes.server import listening_socket


class FakeTransport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def close(self) -> None:
        self.calls.append(("close", b""))
        self.closing = True

    def write_eof(self) -> None:
        self.calls.append(("eof", b""))

    def abort(self) -> None:
        self.calls.append(("abort", b""))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def coalesced() -> tuple[CoalescedWrites, FakeTransport]:
    fake = FakeTransport()
    return CoalescedWrites(fake, asyncio.get_running_loop()), fake  # type: ignore[arg-type]


async def test_writes_in_one_turn_go_out_as_one() -> None:
    writes, fake = coalesced()
    writes.write(b"HTTP/1.1 200 OK\r\n\r\n")
    writes.write(b"body")
    assert fake.calls == []
    assert writes.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\nbody")
    await asyncio.sleep(0)
    assert fake.calls == [("write", b"HTTP/1.1 200 OK\r\n\r\nbody")]
    writes.write(b"next")
    await asyncio.sleep(0)
    assert fake.calls[-1] == ("write", b"next")


async def test_close_and_eof_send_what_is_pending_first_and_abort_drops_it() -> None:
    writes, fake = coalesced()
    writes.write(b"a")
    writes.close()
    assert fake.calls == [("write", b"a"), ("close", b"")]
    await asyncio.sleep(0)
    assert len(fake.calls) == 2  # nothing written twice, nothing after the close
    writes, fake = coalesced()
    writes.write(b"b")
    writes.write_eof()
    assert fake.calls == [("write", b"b"), ("eof", b"")]
    writes, fake = coalesced()
    writes.write(b"c")
    writes.abort()
    await asyncio.sleep(0)
    assert fake.calls == [("abort", b"")]
    assert writes.get_extra_info("peername") == "info:peername"  # the rest goes through


async def test_nothing_is_written_once_the_peer_has_gone() -> None:
    writes, fake = coalesced()
    writes.write(b"late")
    fake.closing = True  # the connection was lost within the turn
    await asyncio.sleep(0)
    assert fake.calls == []


released = asyncio.Event()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    headers = [(b"content-type", b"text/plain")]
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"first|", "more_body": True})
        await released.wait()  # the client has read the first part before the second exists
        await send({"type": "http.response.body", "body": b"second"})
        return
    body = scope["path"].encode()
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# uvicorn's own keep-alive timeout, which `serve` raises (cli/proxies.py).
UVICORN_KEEP_ALIVE_S = 5


@pytest.fixture
async def port() -> AsyncIterator[int]:
    """The app under the options `serve` gives uvicorn."""
    sock = listening_socket("127.0.0.1", 0)
    config: Any = uvicorn.Config(
        app, http=ServiceProtocol, log_level="warning", lifespan="off", **proxy_options()
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    await task


async def read_until(reader: asyncio.StreamReader, marker: bytes) -> bytes:
    return await asyncio.wait_for(reader.readuntil(marker), 5)


async def test_pipelined_requests_are_answered_in_order(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n")
    first = await read_until(reader, b"/one")
    second = await read_until(reader, b"/two")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 4\r\n" in first
    assert second.startswith(b"HTTP/1.1 200 OK\r\n")
    writer.write(b"GET /three HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rest = await asyncio.wait_for(reader.read(), 5)  # to the end: the server closes
    assert rest.endswith(b"/three") and b"connection: close\r\n" in rest
    writer.close()


async def test_a_streamed_part_is_not_held_back(port: int) -> None:
    released.clear()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_until(reader, b"first|")).startswith(b"HTTP/1.1 200 OK\r\n")
    released.set()
    assert b"second" in await read_until(reader, b"0\r\n\r\n")
    writer.close()


async def test_an_idle_connection_outlives_uvicorns_keep_alive(port: int) -> None:
    """A proxy or client reusing a connection idle for longer than uvicorn's 5 s is answered:
    with uvicorn's default the service would have closed it, and a request sent as it closes
    fails."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
    await read_until(reader, b"/one")
    await asyncio.sleep(UVICORN_KEEP_ALIVE_S + 1)
    writer.write(b"GET /two HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_until(reader, b"/two")).startswith(b"HTTP/1.1 200 OK\r\n")
    writer.close()
