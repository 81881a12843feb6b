"""`controlcenter serve` closes the connections of clients too slow to be real: silent ones, heads
trickled a line at a time, bodies trickled a byte at a time; meanwhile it keeps answering.

A real `serve` process with the timeouts cut to 1 s (`CLIENT_HEAD_TIMEOUT_S`,
`CLIENT_BODY_TIMEOUT_S`), raw connections on loopback; each connection's end is awaited, not
timed.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.conftest import Cli
from tests.cli.test_commands import free_port, wait_until_serving

PER_KIND = 60  # connections of each kind, held at once
TRICKLE_S = 0.2  # a line or a byte this often: progress, but never enough
HANG_GUARD_S = 60  # only so that a broken server fails the test instead of hanging it


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("slow")
    cli = Cli(workdir=workdir, db_path=workdir / "var" / "slow.db")
    cli.create_database()
    port = free_port()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLIENT_HEAD_TIMEOUT_S", "1")
        patch.setenv("CLIENT_BODY_TIMEOUT_S", "1")
        process = cli.popen("serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


async def held_until_closed(port: int, first: bytes, trickle: bytes) -> bytes:
    """Send `first`, then `trickle` every `TRICKLE_S` until the server ends the connection;
    what the server sent before it did."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = b""

    async def send() -> None:
        try:
            writer.write(first)
            while trickle:
                await writer.drain()
                await asyncio.sleep(TRICKLE_S)
                writer.write(trickle)
        except (ConnectionError, RuntimeError):
            pass  # closed by the server

    sender = asyncio.create_task(send())
    try:
        while chunk := await reader.read(65536):
            received += chunk
    except ConnectionError:
        pass
    finally:
        sender.cancel()
        writer.close()
    return received


async def test_slow_clients_are_closed_while_healthz_answers(served: str) -> None:
    port = int(served.rsplit(":", 1)[1])
    kinds = {
        "silent": (b"", b""),
        "head a line at a time": (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"X-Slow: 1\r\n"),
        "body a byte at a time": (
            b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{",
            b" ",
        ),
    }
    held = {
        name: [asyncio.create_task(held_until_closed(port, *kind)) for _ in range(PER_KIND)]
        for name, kind in kinds.items()
    }
    async with httpx.AsyncClient(base_url=served) as client:
        for _ in range(5):  # while they are held
            assert (await client.get("/healthz")).status_code == 200
            await asyncio.sleep(0.1)
    async with asyncio.timeout(HANG_GUARD_S):
        for name, tasks in held.items():
            answers = await asyncio.gather(*tasks)
            # Closed without an answer: none of them ever sent a whole request.
            assert answers == [b""] * PER_KIND, name
    async with httpx.AsyncClient(base_url=served) as client:
        assert (await client.get("/healthz")).status_code == 200


async def test_a_request_sent_at_once_is_served_and_its_connection_kept(served: str) -> None:
    """The timers never touch a client that sends its request at once, nor its idle
    keep-alive connection before uvicorn's own timeout."""
    port = int(served.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(2):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            await asyncio.sleep(1.5)  # idle past the head timeout, within keep-alive
    finally:
        writer.close()
