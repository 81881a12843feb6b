"""The MCP conformance suite's client scenarios, run against the service's own MCP client.

The suite (`@modelcontextprotocol/conformance`, installed with the Node.js 22 it needs into
tests/conformance by scripts/ensure-conformance.sh) starts each scenario's server and runs
`controlcenter mcp conformance-client` against it, then judges what its server saw; the checks
it writes (`checks.json`) and the command's output are read here. docs/mcp.md lists the
scenarios that run and, with the reason, the ones that do not apply.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controlcenter.cli.mcp import SCENARIOS
from tests.cli.conftest import ENTRY_POINT

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[3]
INSTALLED = REPO / "tests" / "conformance" / "node_modules"
NODE = INSTALLED / ".bin" / "node"
SUITE = INSTALLED / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# Generous: the client is a fresh Python process, slow to start on two loaded cores.
CLIENT_TIMEOUT_MS = 180_000
RUN_TIMEOUT_S = 300

# The checks of a scenario behind OAuth that must succeed: the protected resource metadata and
# the authorization server's metadata found, a token requested, and every MCP request carrying it.
OAUTH_CHECKS = {
    "prm-pathbased-requested",
    "authorization-server-metadata",
    "token-request",
    "valid-bearer-token",
}
TEST_TOOL = [{"tool": "test-tool", "result": "test"}]
# Per scenario: the checks that must succeed, and what the command prints (one JSON line per
# tool called).
EXPECTED: dict[str, tuple[set[str], list[dict[str, Any]]]] = {
    "initialize": ({"mcp-client-initialization"}, []),
    "tools_call": (
        {"tool-add-numbers"},
        [{"tool": "add_numbers", "result": "The sum of 2 and 3 is 5"}],
    ),
    "sse-retry": (
        {"client-sse-graceful-reconnect", "client-sse-last-event-id"},
        [{"tool": "test_reconnection", "result": "Reconnection test completed successfully"}],
    ),
    # The client credentials grant, the client authenticated with HTTP Basic.
    "auth/client-credentials-basic": (OAUTH_CHECKS | {"client-credentials-basic-auth"}, TEST_TOOL),
    # The client id and secret registered beforehand, sent with HTTP Basic, no registration.
    "auth/pre-registration": (OAUTH_CHECKS | {"pre-registration-auth"}, TEST_TOOL),
}
# The suite also judges how late a reconnection comes (a warning past 700 ms, a failure past
# 1 s after the stream closed), which measures the machine's load as much as the client; only
# its lower bound, that the client waited the `retry` the server gave, is asserted.
RETRY_TIMING = "client-sse-retry-timing"
# The grant the client's token requests use: the only one the service offers.
TOKEN_REQUEST = "token-request"


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """The suite and Node.js 22 (quick when they are there, as `make test` installed them)."""
    subprocess.run([REPO / "scripts" / "ensure-conformance.sh"], check=True)


def suite(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(SUITE), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=os.environ.copy(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_every_scenario_the_command_knows_is_tested() -> None:
    assert set(SCENARIOS) == set(EXPECTED)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_client_scenario_passes(scenario: str, tmp_path: Path) -> None:
    command = f"{shlex.quote(str(ENTRY_POINT))} mcp conformance-client"
    run = suite(
        "client",
        "--command",
        command,
        "--scenario",
        scenario,
        "--timeout",
        str(CLIENT_TIMEOUT_MS),
        "-o",
        str(tmp_path / "results"),
        cwd=tmp_path,
    )
    assert "Client exited with code" not in run.stderr, run.stderr
    assert "Client timed out" not in run.stderr, run.stderr
    [result] = (tmp_path / "results").glob(f"{scenario}-*")
    checks: list[dict[str, Any]] = json.loads((result / "checks.json").read_text())
    succeeded = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    required, printed = EXPECTED[scenario]
    assert required <= succeeded, checks
    for check in checks:
        if check["id"] == RETRY_TIMING:
            details = check["details"]
            assert not details["tooEarly"], check
            assert details["actualDelayMs"] >= details["minAcceptableMs"], check
        else:
            assert check["status"] in ("SUCCESS", "INFO"), check
        if check["id"] == TOKEN_REQUEST:
            assert check["details"]["grantType"] == "client_credentials", check
    lines = (result / "stdout.txt").read_text().splitlines()
    assert [json.loads(line) for line in lines] == printed


def test_every_client_scenario_of_the_suite_is_run_or_documented(tmp_path: Path) -> None:
    listed = suite("list", "--client", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    scenarios = re.findall(r"^\s+- (\S+)", listed.stdout, re.MULTILINE)
    assert set(SCENARIOS) <= set(scenarios)
    docs = (REPO / "docs" / "mcp.md").read_text()
    section = docs.split("## The conformance suite", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.MULTILINE))
    assert set(rows) == set(scenarios)
    for name, what in rows.items():
        if name in SCENARIOS:
            assert what.startswith("runs: "), (name, what)
        else:
            assert what.startswith("does not apply: "), (name, what)
