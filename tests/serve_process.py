"""`controlcenter serve` as one real process on a test's database, for the tests that kill it:
one process (serve's default is one per core), so the test kills *the* process that does the
work, in a session of its own, so that nothing of it outlives the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from tests.conftest import RunningServer
from tests.fakes.server import listening_socket
from tests.outbox.conftest import wait_for

COLD_START_S = 60.0  # a process's first imports on a busy machine


@contextmanager
def serve_process(
    server: RunningServer, log: Path, env: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The process's address and the process; `env` adds the fakes' addresses and settings.
    Killed (SIGKILL, with its session) when the block ends."""
    config = server.config
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    environment = {
        **os.environ,
        "DATABASE_URL": config.database_url,
        "SECRET_KEY": config.secret_key or "",
        "SETTINGS_ENCRYPTION_KEY": config.settings_encryption_key or "",
        "VAR_DIR": str(log.parent / "var"),
        "PROVIDER_MAX_RETRIES": "0",
        "MCP_TIMEOUT_S": "1",
        **env,
    }
    command = Path(sys.executable).parent / "controlcenter"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(command), "serve", "--port", str(port), "--workers", "1"],
            env=environment,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


async def serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the process answers `/healthz`; failing at once if it exited, with the end
    of its log in the failure either way (a CI run keeps only its output)."""

    async def up() -> bool:
        assert process.poll() is None, f"serve exited:\n{log_tail(log)}"
        try:
            async with httpx.AsyncClient() as http:
                return (await http.get(url + "/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await wait_for(up, within=COLD_START_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {url} not serving:\n{log_tail(log)}") from None


def log_tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
