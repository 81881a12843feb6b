"""`controlcenter users ...` and `tokens ...` through the installed entry point."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import time

import pytest

from tests.cli.conftest import ENTRY_POINT, Cli

pytestmark = pytest.mark.timeout(600)


def ok(cli: Cli, *args: str, stdin: str | None = None) -> str:
    result = cli.run(*args, stdin=stdin)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def refused(cli: Cli, *args: str, message: str, stdin: str | None = None) -> None:
    result = cli.run(*args, stdin=stdin)
    assert result.returncode != 0, (args, result.stdout)
    assert message in result.stderr, (args, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout


def users_by_email(cli: Cli) -> dict[str, dict[str, object]]:
    listed = json.loads(ok(cli, "users", "list", "--json"))
    return {user["email"]: user for user in listed}


def test_operator_manages_users(cli: Cli) -> None:
    ok(cli, "users", "create", "--email", "root@example.com", "--role", "super_admin")
    ok(cli, "users", "create", "--email", "bea@example.com", "--name", "Bea")

    table = ok(cli, "users", "list")
    header, *rows = table.strip().splitlines()
    assert header.split()[:3] == ["EMAIL", "ROLE", "STATUS"]
    assert [row.split()[:3] for row in rows] == [
        ["bea@example.com", "user", "active"],
        ["root@example.com", "super_admin", "active"],
    ]

    assert "bea@example.com is now admin" in ok(
        cli, "users", "set-role", "--email", "BEA@example.com", "--role", "admin"
    )
    assert users_by_email(cli)["bea@example.com"]["role"] == "admin"

    ok(cli, "users", "disable", "--email", "bea@example.com")
    assert users_by_email(cli)["bea@example.com"]["disabled"] is True
    ok(cli, "users", "enable", "--email", "bea@example.com")
    assert users_by_email(cli)["bea@example.com"]["disabled"] is False

    ok(cli, "users", "set-crm", "--email", "bea@example.com", "--location-id", "Loc_9-z")
    assert users_by_email(cli)["bea@example.com"]["crmLocationId"] == "Loc_9-z"
    assert "unlinked" in ok(cli, "users", "set-crm", "--email", "bea@example.com",
                            "--location-id", "")  # fmt: skip
    assert users_by_email(cli)["bea@example.com"]["crmLocationId"] is None

    reset = ok(cli, "users", "reset-password", "--email", "bea@example.com")
    assert re.search(r"^password: \S{12,}$", reset, re.MULTILINE)
    chosen = ok(
        cli, "users", "reset-password", "--email", "bea@example.com", "--password-stdin",
        stdin="a chosen passphrase\n",
    )  # fmt: skip
    assert "password:" not in chosen

    assert "deleted bea@example.com" in ok(cli, "users", "delete", "--email", "bea@example.com")
    assert set(users_by_email(cli)) == {"root@example.com"}


def test_refusals(cli: Cli) -> None:
    ok(cli, "users", "create", "--email", "root@example.com", "--role", "super_admin")
    last = "the last active super administrator cannot be demoted, disabled or deleted"
    for args in (
        ["users", "set-role", "--email", "root@example.com", "--role", "admin"],
        ["users", "disable", "--email", "root@example.com"],
        ["users", "delete", "--email", "root@example.com"],
    ):
        refused(cli, *args, message=last)
    for args in (
        ["users", "set-role", "--email", "nobody@example.com", "--role", "admin"],
        ["users", "disable", "--email", "nobody@example.com"],
        ["users", "enable", "--email", "nobody@example.com"],
        ["users", "delete", "--email", "nobody@example.com"],
        ["users", "reset-password", "--email", "nobody@example.com"],
        ["users", "set-crm", "--email", "nobody@example.com", "--location-id", "L1"],
        ["tokens", "list", "--email", "nobody@example.com"],
    ):
        refused(cli, *args, message="no user with e-mail nobody@example.com")
    refused(cli, "users", "set-role", "--email", "root@example.com", "--role", "owner",
            message="role must be one of user, admin, super_admin")  # fmt: skip
    for bad in ("has space", "x" * 65, "semi;colon"):
        refused(cli, "users", "set-crm", "--email", "root@example.com", "--location-id", bad,
                message="a location id is 1-64 letters, digits, '_' or '-'")  # fmt: skip
    refused(cli, "users", "create", "--email", "not-an-address", message="not an e-mail address")
    # A look-alike of an existing address is that address.
    ok(cli, "users", "create", "--email", "zo\u00eb@ex\u00e4mple.com")
    for form in ("zoe\u0308@exa\u0308mple.com", "ZO\u00cb@xn--exmple-cua.com"):
        exists = "a user with e-mail zo\u00eb@xn--exmple-cua.com already exists"
        refused(cli, "users", "create", "--email", form, message=exists)
    ok(cli, "users", "delete", "--email", "zoe\u0308@EXA\u0308MPLE.com")
    for command in (["users", "create", "--email", "s@example.com"],
                    ["users", "reset-password", "--email", "root@example.com"]):  # fmt: skip
        refused(cli, *command, "--password-stdin", stdin="elevenchars\n",
                message="a password must have at least 12 characters")  # fmt: skip
        refused(cli, *command, "--password-stdin", stdin="\n", message="empty password")
    refused(cli, "tokens", "revoke", "--id", "nope", message="no token with id nope")
    assert set(users_by_email(cli)) == {"root@example.com"}
    assert users_by_email(cli)["root@example.com"]["role"] == "super_admin"


def test_tokens_list_and_revoke(cli: Cli) -> None:
    ok(cli, "users", "create", "--email", "bea@example.com")
    secret = ok(cli, "tokens", "create", "--email", "bea@example.com", "--label", "ci").strip()
    assert secret.startswith("cct_")
    listed = json.loads(ok(cli, "tokens", "list", "--email", "bea@example.com", "--json"))
    assert [(t["label"], t["lastUsedAt"]) for t in listed] == [("ci", None)]
    table = ok(cli, "tokens", "list", "--email", "bea@example.com")
    assert listed[0]["id"] in table and "never" in table and secret not in table
    assert f"revoked token {listed[0]['id']}" in ok(cli, "tokens", "revoke", "--id",
                                                     listed[0]["id"])  # fmt: skip
    assert cli.query("SELECT count(*) FROM api_tokens") == [(0,)]


def _read_more(fd: int, deadline: float) -> bytes:
    """The next output of the terminal; b"" once the command has closed it."""
    ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise AssertionError("the command printed nothing more in time")
    try:
        return os.read(fd, 1024)
    except OSError:  # EIO: the child closed the terminal
        return b""


def _on_a_terminal(cli: Cli, args: list[str], answers: list[bytes]) -> tuple[bytes, int]:
    """Run the command with a pseudo-terminal as its controlling terminal and stdin, answering
    each prompt (a line ending in ": ") in turn."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the command
        os.chdir(cli.workdir)
        os.execve(str(ENTRY_POINT), [str(ENTRY_POINT), *args], cli.env)  # noqa: S606
    output = b""
    deadline = time.monotonic() + 120
    pending = list(answers)
    try:
        while True:
            chunk = _read_more(fd, deadline)
            if not chunk:
                break
            output += chunk
            if pending and output.endswith(b": "):
                os.write(fd, pending.pop(0) + b"\n")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)  # only if it still waits for something
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return output, os.waitstatus_to_exitcode(status)


def test_password_is_prompted_without_echo_on_a_terminal(cli: Cli) -> None:
    ok(cli, "users", "create", "--email", "bea@example.com")
    typed = b"typed on a terminal"
    output, code = _on_a_terminal(
        cli, ["users", "reset-password", "--email", "bea@example.com"], [typed, typed]
    )
    assert code == 0, output
    assert typed not in output  # no echo
    assert b"password of bea@example.com changed" in output
    assert b"password: " not in output  # a typed password is never printed

    output, code = _on_a_terminal(
        cli, ["users", "reset-password", "--email", "bea@example.com"], [typed, b"different!!!!"]
    )
    assert code == 1 and b"the passwords do not match" in output

    output, code = _on_a_terminal(
        cli, ["users", "create", "--email", "cy@example.com"], [b""]
    )  # empty: generated
    assert code == 0, output
    assert re.search(rb"password: \S{12,}", output)
