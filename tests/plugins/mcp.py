"""The loopback MCP servers (tests/fakes/mcp_server.py, tests/fakes/highlevel_mcp.py,
tests/fakes/oauth_mcp.py, tests/fakes/mcp_echo.py), each started once per test session and
emptied before every test that uses it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.highlevel_mcp import FakeHighLevelMcp, build_fake_highlevel_mcp
from tests.fakes.mcp_echo import FakeEchoMcp, build_fake_echo_mcp
from tests.fakes.mcp_server import FakeMcp, build_fake_mcp
from tests.fakes.oauth_mcp import FakeOAuthMcp, build_fake_oauth_mcp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def mcp_config() -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {"mcp_timeout_s": 5.0}


@pytest.fixture(scope="session")
def fake_mcp() -> Iterator[FakeMcp]:
    fake = build_fake_mcp()
    with fake.server:
        yield fake


@pytest.fixture(scope="session")
def fake_highlevel() -> Iterator[FakeHighLevelMcp]:
    """The running stand-in for HighLevel's MCP server."""
    fake = build_fake_highlevel_mcp()
    with fake.server:
        yield fake


@pytest.fixture(scope="session")
def fake_oauth_mcp() -> Iterator[FakeOAuthMcp]:
    """The running MCP server behind OAuth with its authorization server."""
    fake = build_fake_oauth_mcp()
    with fake.server:
        yield fake


@pytest.fixture(scope="session")
def fake_echo_mcp() -> Iterator[FakeEchoMcp]:
    """The running MCP host that echoes every header it receives."""
    fake = build_fake_echo_mcp()
    with fake.server:
        yield fake


@pytest.fixture(autouse=True)
def _reset_mcp_fakes(request: pytest.FixtureRequest) -> None:
    """Each test that uses a fake starts with its call log emptied (and, behind OAuth, its
    tokens revoked)."""
    for name in ("fake_mcp", "fake_highlevel", "fake_oauth_mcp", "fake_echo_mcp"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


@pytest.fixture
def dead_url() -> str:
    """An address on 127.0.0.1 where nothing listens (connections are refused at once)."""
    return f"http://127.0.0.1:{_free_port()}/mcp"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def v1_url() -> Iterator[str]:
    """A server of the `mcp` package's 1.x line speaking 2025-06-18, the initialize handshake
    and a session id (tests/fakes/mcp_v1_server.py, run from the environment
    scripts/ensure-mcp1.sh makes): its address."""
    subprocess.run([ROOT / "scripts" / "ensure-mcp1.sh"], check=True)
    port = _free_port()
    server = subprocess.Popen(
        [ROOT / ".venv-mcp1" / "bin" / "python", ROOT / "tests/fakes/mcp_v1_server.py", str(port)],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("ready"), line
        url = f"http://127.0.0.1:{port}/mcp"
        _wait_listening(port)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def _wait_listening(port: int) -> None:
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError("the 1.x server did not listen")
