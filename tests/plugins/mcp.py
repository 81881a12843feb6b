"""The loopback MCP servers (tests/fakes/mcp_server.py, tests/fakes/highlevel_mcp.py,
tests/fakes/oauth_mcp.py), each started once per test session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.highlevel_mcp import FakeHighLevelMcp, build_fake_highlevel_mcp
from tests.fakes.mcp_server import FakeMcp, build_fake_mcp
from tests.fakes.oauth_mcp import FakeOAuthMcp, build_fake_oauth_mcp


@pytest.fixture(scope="session")
def mcp_config() -> dict[str, Any]:
    """Config values that point the service at this domain's fakes."""
    return {"mcp_timeout_s": 5.0}


@pytest.fixture(scope="session")
def _fake_mcp_session() -> Iterator[FakeMcp]:
    fake = build_fake_mcp()
    with fake.server:
        yield fake


@pytest.fixture
def fake_mcp(_fake_mcp_session: FakeMcp) -> FakeMcp:
    """The running fake, its call log emptied for this test."""
    _fake_mcp_session.reset()
    return _fake_mcp_session


@pytest.fixture(scope="session")
def _fake_highlevel_session() -> Iterator[FakeHighLevelMcp]:
    fake = build_fake_highlevel_mcp()
    with fake.server:
        yield fake


@pytest.fixture
def fake_highlevel(_fake_highlevel_session: FakeHighLevelMcp) -> FakeHighLevelMcp:
    """The running stand-in for HighLevel's MCP server, its call log emptied for this test."""
    _fake_highlevel_session.reset()
    return _fake_highlevel_session


@pytest.fixture(scope="session")
def _fake_oauth_mcp_session() -> Iterator[FakeOAuthMcp]:
    fake = build_fake_oauth_mcp()
    with fake.server:
        yield fake


@pytest.fixture
def fake_oauth_mcp(_fake_oauth_mcp_session: FakeOAuthMcp) -> FakeOAuthMcp:
    """The running MCP server behind OAuth with its authorization server, reset for this test
    (its tokens revoked)."""
    _fake_oauth_mcp_session.reset()
    return _fake_oauth_mcp_session


@pytest.fixture
def dead_url() -> str:
    """An address on 127.0.0.1 where nothing listens (connections are refused at once)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/mcp"
