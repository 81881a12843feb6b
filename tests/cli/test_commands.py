"""Every command of the CLI except `worker`, through the installed entry point."""

from __future__ import annotations

import hashlib
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from argon2 import PasswordHasher

from controlcenter.db.migrate import alembic_config
from tests.cli.conftest import Cli


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


# Each call starts a fresh interpreter: allow for a loaded machine.
pytestmark = pytest.mark.timeout(600)


def test_db_upgrade_creates_the_schema(cli: Cli) -> None:
    # Every other command upgrades first as well, so running it again is exercised below.
    result = cli.run("db", "upgrade")
    assert result.returncode == 0, result.stderr
    assert "database is up to date" in result.stdout
    tables = {name for (name,) in cli.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "users",
        "sessions",
        "api_tokens",
        "onboarding",
        "settings",
        "conversations",
        "messages",
        "outbox_jobs",
    } <= tables
    assert cli.query("SELECT version_num FROM alembic_version") == [(head_revision(),)]


def test_users_create(cli: Cli) -> None:
    hasher = PasswordHasher()

    made = cli.run("users", "create", "--email", "Boss@Example.com", "--role", "super_admin")
    assert made.returncode == 0, made.stderr
    match = re.search(r"^password: (\S+)$", made.stdout, re.MULTILINE)
    assert match, made.stdout
    assert "created super_admin boss@example.com" in made.stdout
    generated = match.group(1)
    assert len(generated) >= 16

    chosen = cli.run(
        "users", "create", "--email", "admin@example.com", "--name", "Ada", "--role", "admin",
        "--password-stdin", stdin="correct horse battery\n",
    )  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    assert "password:" not in chosen.stdout  # a chosen password is never echoed

    plain = cli.run("users", "create", "--email", "user@example.com")
    assert plain.returncode == 0, plain.stderr

    rows = {
        email: (name, role, password_hash)
        for email, name, role, password_hash in cli.query(
            "SELECT email, name, role, password_hash FROM users"
        )
    }
    assert {email: row[1] for email, row in rows.items()} == {
        "boss@example.com": "super_admin",
        "admin@example.com": "admin",
        "user@example.com": "user",
    }
    assert rows["admin@example.com"][0] == "Ada"
    assert all(row[2].startswith("$argon2id$") for row in rows.values())
    assert hasher.verify(rows["boss@example.com"][2], generated)
    assert hasher.verify(rows["admin@example.com"][2], "correct horse battery")

    for args, stdin, message in (
        (["--email", "x@example.com", "--role", "owner"], None, "role must be one of"),
        (["--email", "BOSS@example.com"], None, "already exists"),
        (["--email", "y@example.com", "--password-stdin"], "\n", "empty password"),
    ):
        failed = cli.run("users", "create", *args, stdin=stdin)
        assert failed.returncode == 1, (args, failed.stdout)
        assert message in failed.stderr, failed.stderr
        assert "Traceback" not in failed.stderr + failed.stdout
    assert cli.query("SELECT count(*) FROM users") == [(3,)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_serving(process: subprocess.Popen[str], url: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"serve exited with {process.returncode}: {output}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail("serve did not answer /healthz in time")


def stop(process: subprocess.Popen[str]) -> str:
    """Ctrl-C to `serve`, killed if it has not ended 30 s later; its output."""
    process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def test_serve_first_run_then_users_tokens_and_crm(cli: Cli) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = cli.popen("serve", "--host", "127.0.0.1", "--port", str(port), open_files=256)
    try:
        wait_until_serving(process, url)
        assert httpx.get(url + "/healthz").json() == {"status": "ok"}
        # Started with 256 open files at most, serve raised its soft limit to the hard one.
        limits = Path(f"/proc/{process.pid}/limits").read_text()
        found = re.search(r"Max open files\s+(\S+)\s+(\S+)", limits)
        assert found is not None
        soft, hard = found.groups()
        assert soft == hard != "256"
        assert httpx.get(url + "/readyz").json() == {"status": "ok"}

        made = cli.run("users", "create", "--email", "first@example.com", "--role", "super_admin")
        assert made.returncode == 0, made.stderr
        password = made.stdout.split("password: ", 1)[1].strip()
        login = httpx.post(
            url + "/api/v1/auth/login", json={"email": "first@example.com", "password": password}
        )
        assert login.status_code == 200
        assert login.json()["user"]["role"] == "super_admin"

        token_run = cli.run("tokens", "create", "--email", "FIRST@example.com", "--label", "ci")
        assert token_run.returncode == 0, token_run.stderr
        token = token_run.stdout.strip()
        assert token.startswith("cct_") and "\n" not in token
        me = httpx.get(url + "/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.json()["user"]["email"] == "first@example.com"
        index = httpx.get(
            url + "/ocs/v2.php/apps/dashboard/api",
            headers={"Authorization": f"Bearer {token}", "OCS-APIRequest": "true"},
        )
        assert index.status_code == 200
        # Stored hashed, shown once: the plaintext is nowhere in the database.
        assert cli.query("SELECT token_hash, label FROM api_tokens") == [
            (hashlib.sha256(token.encode()).hexdigest(), "ci")
        ]
        assert token.encode() not in cli.db_path.read_bytes()

        linked = cli.run("users", "set-crm", "--email", "first@example.com", "--location-id", "L1")
        assert linked.returncode == 0, linked.stderr
        assert cli.query("SELECT crm_location_id FROM users") == [("L1",)]

        for args in (
            ["tokens", "create", "--email", "nobody@example.com"],
            ["users", "set-crm", "--email", "nobody@example.com", "--location-id", "L2"],
        ):
            failed = cli.run(*args)
            assert failed.returncode == 1
            assert "no user with e-mail nobody@example.com" in failed.stderr
        assert cli.query("SELECT count(*) FROM api_tokens") == [(1,)]
    finally:
        output = stop(process)
    assert process.returncode == 0, output
    # On an empty database the service told the newcomer how to make the first super admin.
    assert "controlcenter users create --email you@example.com --role super_admin" in output
    assert "No users yet" in output
