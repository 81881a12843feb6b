"""`LOG_FORMAT=json make run`, from start to Ctrl-C: every line is one JSON object, each request
has an id echoed as X-Request-ID and carried by every record it causes (the chat's background
work and the outbox delivery included), and make ends without an error."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlcenter.db.migrate import upgrade

pytestmark = pytest.mark.timeout(600)

ENTRY_POINT = Path(sys.executable).parent / "controlcenter"
PASSWORD = "a long enough passphrase"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def outside_python() -> str:
    """The python3 that runs `make` for a user (the one with uv), not this test's venv."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    found = shutil.which("python3", path=path)
    assert found, "no python3 outside the virtual environment"
    return found


def wait_for(predicate: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_json_log_stream_of_make_run(repo_root: Path, tmp_path: Path) -> None:
    port, closed_port = free_port(), free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'cc.db'}",
        "VAR_DIR": str(tmp_path / "var"),
        "LOG_FORMAT": "json",
        "PORT": str(port),
        # Nothing listens there: the chat's provider call fails, in the background.
        "PROVIDER_A_BASE_URL": f"http://127.0.0.1:{closed_port}",
        "PROVIDER_MAX_RETRIES": "0",
        "OUTBOX_POLL_INTERVAL_S": "0.1",
        "PYTHON": outside_python(),
    }
    env.pop("SECRET_KEY", None)
    # Under `make test` the outer make's jobserver flags would reach this make, which then
    # warns (a line that is not the service's) that the jobserver is unavailable.
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    upgrade(env["DATABASE_URL"])  # what `db upgrade` does: the commands refuse no database
    made = subprocess.run(
        [str(ENTRY_POINT), "users", "create", "--email", "boss@example.com",
         "--role", "super_admin", "--password-stdin"],
        input=PASSWORD + "\n", env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    log_path = tmp_path / "make-run.log"
    with log_path.open("w") as sink:
        make = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=repo_root,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            try:
                return httpx.get(url + "/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return make.poll() is not None and pytest.fail(log_path.read_text())

        wait_for(healthy, "the service")
        with httpx.Client(base_url=url, timeout=30) as http:
            given = http.get("/healthz", headers={"X-Request-ID": "req-123"})
            assert given.headers["X-Request-ID"] == "req-123"
            refused = http.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
            assert refused.headers["X-Request-ID"] not in ("", "bad id with spaces")
            login = http.post(
                "/api/v1/auth/login", json={"email": "boss@example.com", "password": PASSWORD}
            )
            headers = {"Authorization": f"Bearer {login.json()['token']}"}
            saved = http.post("/api/v1/onboarding", json={"gciLast12Months": "250"},
                              headers=headers)  # fmt: skip
            assert saved.status_code == 200
            http.put("/api/v1/admin/settings", json={"providerAApiKey": "sk-test-" + "k" * 40},
                     headers=headers)  # fmt: skip
            chat = http.post("/api/v1/control-center/chat", json={"message": "hi"},
                             headers=headers)  # fmt: skip
            assert '"type":"error"' in chat.text.replace(" ", "")
            onboarding_id = saved.headers["X-Request-ID"]
            chat_id = chat.headers["X-Request-ID"]

        def records() -> list[dict[str, Any]]:
            # Only finished lines: the service may be writing the last one right now (every
            # line is still checked as JSON once it has stopped, below).
            finished = log_path.read_text().split("\n")[:-1]
            return [json.loads(line) for line in finished if line]

        wait_for(
            lambda: any(
                r.get("request_id") == onboarding_id
                and r["logger"].startswith("controlcenter.outbox")
                for r in records()
            ),
            "the outbox delivery's record",
        )
    finally:
        os.killpg(make.pid, signal.SIGINT)
        try:
            make.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
    text = log_path.read_text()
    # make itself got the SIGINT as well, as from a terminal: it may end by that signal, as any
    # program stopped with Ctrl-C does, but it reports no failed recipe.
    assert make.returncode in (0, -signal.SIGINT), text
    assert "make: ***" not in text
    lines = text.splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(parsed[-1], dict) and {"event", "level", "timestamp"} <= set(parsed[-1])
    loggers = {record["logger"] for record in parsed}
    assert {"alembic.runtime.migration", "uvicorn.error", "controlcenter.request"} <= loggers
    assert "uvicorn.access" not in loggers  # one line per request: the service's own
    assert any("No users yet" in r["event"] for r in parsed) is False  # a user exists
    access = [r for r in parsed if r["logger"] == "controlcenter.request"]
    assert all("request_id" in r and "duration_ms" in r for r in access)
    assert any(r["request_id"] == "req-123" and r["path"] == "/healthz" for r in access)
    chat_records = [r for r in parsed if r.get("request_id") == chat_id]
    provider_error = [r for r in chat_records if r["event"] == "provider error"]
    assert provider_error and provider_error[0]["message"], chat_records
    assert "k" * 40 not in text  # the provider key never reaches the log
    assert any(r["event"] == "Finished server process" or "Finished server" in r["event"]
               for r in parsed)  # fmt: skip
