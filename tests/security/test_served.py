"""Attacks on `controlcenter serve` itself: real uvicorn processes, raw sockets.

Two processes share one SQLite database, as the workers of one deployment would.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from controlcenter.web.middleware.header_limit import HEADER_LIMIT
from tests.cli.conftest import Cli
from tests.cli.test_commands import free_port, wait_until_serving

EMAIL = "broker@example.com"
PASSWORD = "correct horse battery staple"
MiB = 1024 * 1024


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Served]]:
    workdir = tmp_path_factory.mktemp("served")
    cli = Cli(workdir=workdir, db_path=workdir / "var" / "served.db")
    cli.create_database()
    created = cli.run("users", "create", "--email", EMAIL, "--password-stdin", stdin=PASSWORD)
    assert created.returncode == 0, created.stderr
    processes = []
    try:
        for _ in range(2):
            port = free_port()
            process = cli.popen("serve", "--host", "127.0.0.1", "--port", str(port))
            processes.append(Served(process, port))
        for one in processes:
            wait_until_serving(one.process, one.url)
        yield processes[0], processes[1]
    finally:
        for one in processes:
            one.process.terminate()
            try:
                one.process.wait(15)
            except subprocess.TimeoutExpired:
                one.process.kill()
                one.process.wait(5)


def exchange(port: int, head: bytes, *, then: bytes = b"", repeat: int = 0) -> bytes:
    """Send `head` (followed by `then` `repeat` times) and return what the server answers.

    The sending runs in a thread while this one reads, as a client would: the answer arrives
    before the client has finished sending.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:

        def send() -> None:
            try:
                sock.sendall(head)
                for _ in range(repeat):
                    sock.sendall(then)
            except OSError:
                pass  # the server stopped reading: expected after a refusal

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        received = b""
        try:
            while b"\r\n\r\n" not in received or not _complete(received):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except OSError:
            pass
        sender.join(30)
        return received


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def request_head(size: int) -> bytes:
    """A GET /healthz whose head (request line, headers, final blank line) is `size` bytes."""
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    end = b"\r\nConnection: close\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


def test_a_head_of_16_kib_is_served_and_one_byte_more_is_431(
    served: tuple[Served, Served],
) -> None:
    first, _ = served
    assert status(exchange(first.port, request_head(HEADER_LIMIT))) == 200
    refused = exchange(first.port, request_head(HEADER_LIMIT + 1))
    assert status(refused) == 431
    assert refused.endswith(b'{"error":"Request header fields too large"}')


def test_a_64_mib_header_is_431_without_growing_the_process(
    served: tuple[Served, Served],
) -> None:
    first, _ = served
    for _ in range(20):  # warm up: allocations of a normal request are made once
        assert httpx.get(first.url + "/healthz").status_code == 200
    before = first.rss_bytes()
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: "
    answer = exchange(first.port, head, then=b"a" * MiB, repeat=64)
    after = first.rss_bytes()
    print(f"64 MiB header: RSS {before} -> {after} bytes ({(after - before) / 1024:+.0f} KiB)")
    assert status(answer) == 431
    # Noise is a few hundred KiB; holding the header would be 64 MiB and more.
    assert after - before < 4 * MiB, (before, after)
    assert httpx.get(first.url + "/healthz").status_code == 200  # still serving


def test_five_thousand_headers_are_431(served: tuple[Served, Served]) -> None:
    first, _ = served
    headers = b"".join(b"X-H-%d: v\r\n" % n for n in range(5000))
    answer = exchange(
        first.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n"
    )
    assert status(answer) == 431


def test_an_oversized_body_is_413(served: tuple[Served, Served]) -> None:
    first, _ = served
    body = b'{"email": "' + b"a" * (2 * MiB) + b'"}'
    response = httpx.post(first.url + "/api/v1/auth/login", content=body, timeout=30)
    assert (response.status_code, response.json()) == (413, {"error": "Request body too large"})


def test_the_throttle_is_shared_by_processes(served: tuple[Served, Served]) -> None:
    first, second = served
    wrong = {"email": EMAIL, "password": "wrong password"}
    for one in (first, second):
        for _ in range(5):
            response = httpx.post(one.url + "/api/v1/auth/login", json=wrong, timeout=30)
            assert response.status_code == 401
    for one in (first, second):
        right = httpx.post(
            one.url + "/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD}, timeout=30
        )
        assert (right.status_code, right.json()) == (429, {"error": "Too many attempts"})
        assert int(right.headers["retry-after"]) > 800


def test_the_service_still_answers_after_the_attacks(served: tuple[Served, Served]) -> None:
    for one in served:
        assert one.process.poll() is None
        assert httpx.get(one.url + "/readyz", timeout=30).status_code == 200
