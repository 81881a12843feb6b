"""`controlcenter mcp conformance-client` through the installed entry point: what it says when a
scenario cannot run. The scenarios themselves run against the conformance suite's servers in
tests/tools/mcp/test_conformance.py."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.fakes.mcp_server import FakeMcp
from tests.fakes.oauth_mcp import CLIENT_ID, CLIENT_SECRET, FakeOAuthMcp

WRONG_SECRET = "cs-wrong-00000000000000000"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def no_db_cli(tmp_path: Path) -> Cli:
    """The command opens no database: none is made."""
    return Cli(workdir=tmp_path, db_path=tmp_path / "var" / "none.db")


def initialize(cli: Cli, url: str, *context: str) -> subprocess.CompletedProcess[str]:
    """The `initialize` scenario against `url`, with `--context` when one is given."""
    extra = ["--context", *context] if context else []
    return cli.run("mcp", "conformance-client", url, "--scenario", "initialize", *extra)


def test_the_initialize_scenario_against_a_server_of_the_current_protocol(
    no_db_cli: Cli, fake_mcp: FakeMcp
) -> None:
    fake_mcp.reset()
    run = initialize(no_db_cli, fake_mcp.url)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "tools/list" in fake_mcp.methods
    assert not (no_db_cli.workdir / "var").exists()


def test_an_unknown_scenario_is_a_usage_error(no_db_cli: Cli) -> None:
    run = no_db_cli.run(
        "mcp", "conformance-client", "http://127.0.0.1:9/mcp", "--scenario", "resources-list"
    )
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "error: unknown scenario 'resources-list'; known: initialize, tools_call, sse-retry, "
        "auth/client-credentials-basic, auth/pre-registration"
    )


def test_a_server_that_does_not_answer_fails_with_its_reason(no_db_cli: Cli) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = initialize(no_db_cli, f"http://127.0.0.1:{port}/mcp")
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "error: cannot connect to the server"
    assert run.stdout == ""


def context(fake: FakeOAuthMcp, secret: str) -> str:
    return json.dumps({"client_id": CLIENT_ID, "client_secret": secret, "issuer": fake.issuer})


def test_client_credentials_in_the_context_reach_a_server_behind_oauth(
    no_db_cli: Cli, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    run = initialize(no_db_cli, fake_oauth_mcp.url, context(fake_oauth_mcp, CLIENT_SECRET))
    assert run.returncode == 0, run.stderr
    [request] = fake_oauth_mcp.token_requests
    assert request["grant_type"] == "client_credentials"
    assert CLIENT_SECRET not in run.stdout + run.stderr


def test_a_refused_client_secret_fails_with_the_authorization_servers_reason(
    no_db_cli: Cli, fake_oauth_mcp: FakeOAuthMcp
) -> None:
    run = initialize(no_db_cli, fake_oauth_mcp.url, context(fake_oauth_mcp, WRONG_SECRET))
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        "error: HTTP 401 Unauthorized: client authentication failed"
    )
    assert WRONG_SECRET not in run.stdout + run.stderr
    assert fake_oauth_mcp.refused == [(401, "invalid_client")]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{client_id", "it is not JSON"),
        ('["a", "b"]', "it is not a JSON object"),
        ('{"client_id": "a", "client_secret": 7}', "client_secret is not a string"),
    ],
)
def test_a_context_that_cannot_be_read_is_a_usage_error(
    no_db_cli: Cli, value: str, reason: str
) -> None:
    run = initialize(no_db_cli, "http://127.0.0.1:9/mcp", value)
    assert run.returncode == 2
    assert run.stderr.strip() == f"error: the scenario's context cannot be read: {reason}"
