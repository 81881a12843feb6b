"""Which database the commands use, their refusal to create one, and `db backup|restore`."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import CLI_TIMEOUT_S, ENTRY_POINT, Cli
from tests.cli.test_commands import free_port, stop, wait_until_serving

pytestmark = pytest.mark.timeout(600)
PASSWORD = "backup-and-restore-1"


def serve(cli: Cli) -> tuple[subprocess.Popen[str], str]:
    """A one-worker `serve` of `cli`'s database, answering, and its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serving = cli.popen("serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
    try:
        wait_until_serving(serving, url)
    except BaseException:
        stop(serving)
        raise
    return serving, url


def log_in(url: str) -> httpx.Response:
    return httpx.post(
        url + "/api/v1/auth/login", json={"email": "boss@example.com", "password": PASSWORD}
    )


def test_a_command_without_a_database_creates_none_and_says_where_it_looked(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "src"
    elsewhere.mkdir()
    env = {**Cli(tmp_path, tmp_path / "unused.db").env, "VAR_DIR": "var"}
    del env["DATABASE_URL"]  # the default: ./var/controlcenter.db, relative to the directory
    for args in (
        ["users", "list"],
        ["users", "create", "--email", "boss@example.com", "--role", "super_admin"],
        ["tokens", "list", "--email", "boss@example.com"],
        ["tools", "list"],
        ["db", "backup", str(tmp_path / "copy.db")],
        ["worker"],
    ):
        result = subprocess.run(
            [str(ENTRY_POINT), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        expected = elsewhere / "var" / "controlcenter.db"
        assert f"No database at {expected}" in result.stderr, result.stderr
        assert "DATABASE_URL" in result.stderr
        assert "Traceback" not in result.stderr
    assert list(elsewhere.iterdir()) == []  # nothing created, not even var/
    assert not (tmp_path / "copy.db").exists()


def test_every_command_names_its_database_on_stderr(cli: Cli) -> None:
    listed = cli.run("users", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert f"database: {cli.db_path}" in listed.stderr
    assert listed.stdout.strip() == "[]"  # stdout is the answer alone


def test_postgresql_backup_and_restore_name_the_tools_and_hide_the_password(cli: Cli) -> None:
    env = {**cli.env, "DATABASE_URL": "postgresql+asyncpg://cc:hunter2secret@db.example:5432/cc"}
    for args, tool in (
        (["db", "backup", "/backups/cc.dump"], "pg_dump"),
        (["db", "restore", "/backups/cc.dump"], "pg_restore"),
    ):
        result = subprocess.run(
            [str(ENTRY_POINT), *args],
            cwd=cli.workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        assert result.returncode == 1
        assert f"on PostgreSQL use {tool}: {tool} " in result.stderr, result.stderr
        assert "postgresql://cc:***@db.example:5432/cc" in result.stderr
        assert "/backups/cc.dump" in result.stderr
        assert "hunter2secret" not in result.stdout + result.stderr


def test_restore_refuses_a_file_that_is_not_a_backup(cli: Cli, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    result = cli.run("db", "restore", str(junk))
    assert result.returncode == 1
    assert "is not a backup of this service's database" in result.stderr


def test_restore_refuses_a_backup_of_a_newer_schema_and_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    cli.create_database()
    copy = tmp_path / "newer.db"
    taken = cli.run("db", "backup", str(copy))
    assert taken.returncode == 0, taken.stderr
    with closing(sqlite3.connect(copy)) as conn, conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00dfacef00d'")
    fresh = Cli(workdir=tmp_path / "fresh", db_path=tmp_path / "fresh" / "var" / "new.db")
    fresh.workdir.mkdir()
    result = fresh.run("db", "restore", str(copy))
    assert result.returncode == 1
    assert "was made by a newer version of the service (schema f00dfacef00d)" in result.stderr
    assert "upgrade the service first" in result.stderr
    assert "Traceback" not in result.stderr
    assert not fresh.db_path.exists()


def test_a_backup_taken_while_serving_restores_into_a_fresh_instance(
    cli: Cli, tmp_path: Path
) -> None:
    made = cli.run(
        "users", "create", "--email", "boss@example.com", "--role", "super_admin",
        "--password-stdin", stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    copy = tmp_path / "backups" / "cc.db"
    copy.parent.mkdir()
    serving, url = serve(cli)
    try:
        assert log_in(url).status_code == 200
        # Written while the service holds the database open (and its write-ahead log).
        taken = cli.run("db", "backup", str(copy))
        assert taken.returncode == 0, taken.stderr
        assert f"database: {cli.db_path}" in taken.stderr
        refused = cli.run("db", "restore", str(copy))
        assert refused.returncode == 1
        assert "a running `serve` or `worker` uses" in refused.stderr
    finally:
        stop(serving)

    fresh = Cli(workdir=tmp_path / "fresh", db_path=tmp_path / "fresh" / "var" / "new.db")
    fresh.workdir.mkdir()
    restored = fresh.run("db", "restore", str(copy))
    assert restored.returncode == 0, restored.stderr
    assert fresh.query("SELECT email FROM users") == [("boss@example.com",)]
    serving, url = serve(fresh)
    try:
        login = log_in(url)
        assert login.status_code == 200
        assert login.json()["user"]["role"] == "super_admin"
    finally:
        output = stop(serving)
    assert "No users yet" not in output


def test_the_first_start_hint_carries_the_instances_own_locations(tmp_path: Path) -> None:
    cli = Cli(workdir=tmp_path, db_path=tmp_path / "data" / "cc.db")
    cli.create_database()
    env = {**cli.env, "VAR_DIR": str(tmp_path / "keys")}
    port = free_port()
    serving = subprocess.Popen(
        [str(ENTRY_POINT), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        wait_until_serving(serving, f"http://127.0.0.1:{port}")
    finally:
        output = stop(serving)
    assert (
        f"DATABASE_URL=sqlite+aiosqlite:///{cli.db_path} VAR_DIR={tmp_path / 'keys'} "
        "python3 -m uv run controlcenter users create --email you@example.com --role super_admin"
    ) in output, output
    assert f"database: {cli.db_path}" in output


def run_with(cli: Cli, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ENTRY_POINT), *args],
        cwd=cli.workdir,
        env={**cli.env, **env},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def test_database_url_may_be_the_plain_path_the_commands_print(cli: Cli) -> None:
    listed = cli.run("users", "list", "--json")
    printed = listed.stderr.split("database: ", 1)[1].splitlines()[0]
    assert printed == str(cli.db_path)
    result = run_with(cli, {"DATABASE_URL": printed}, "users", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert f"database: {cli.db_path}" in result.stderr


UNREACHABLE = "postgresql+asyncpg://cc:hunter2secret@127.0.0.1:1/cc"


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "DATABASE_URL",
            "postgresql+asyncpg://cc:x@db:notaport/cc",
            "DATABASE_URL: not a database",
        ),
        ("DATABASE_URL", ":memory:", "DATABASE_URL: SQLite must be a file database"),
        ("PROVIDER_TIMEOUT_S", "soon", "PROVIDER_TIMEOUT_S: Input should be a valid number"),
        ("DATABASE_URL", UNREACHABLE, "the database could not be used"),
    ],
)
def test_a_configuration_that_cannot_be_used_ends_in_one_line(
    cli: Cli, variable: str, value: str, said: str
) -> None:
    result = run_with(cli, {variable: value}, "users", "list")
    assert result.returncode == 1
    assert f"error: {said}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "╭" not in result.stderr
    assert "hunter2secret" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # `database: ...` and the error


def test_a_backup_into_a_folder_is_a_dated_file_in_it(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    taken = cli.run("db", "backup", str(folder))
    assert taken.returncode == 0, taken.stderr
    (written,) = list(folder.iterdir())
    assert re.fullmatch(r"cli-\d{8}-\d{6}\.db", written.name), written.name
    assert taken.stdout.strip() == f"backed up to {written}"
    with closing(sqlite3.connect(written)) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_a_backup_onto_the_live_database_or_nowhere_is_refused_and_leaves_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    before = cli.db_path.read_bytes()
    for target, said in (
        (cli.db_path, "is the live database"),
        (Path("var") / "cli.db", "is the live database"),  # relative to the command's folder
        (cli.db_path.with_name("cli.db-wal"), "is the live database"),
        (cli.db_path.with_name("cli.db.write-turn"), "is the live database"),
        (tmp_path / "missing" / "copy.db", f"the folder {tmp_path / 'missing'} does not exist"),
    ):
        result = cli.run("db", "backup", str(target))
        assert result.returncode == 1, (target, result.stdout)
        assert f"error: {target} {said}" in result.stderr or f"error: {said}" in result.stderr
        assert "Traceback" not in result.stderr
    assert cli.db_path.read_bytes() == before
    assert not list(tmp_path.rglob("*.partial"))


def test_a_backup_that_cannot_be_written_leaves_no_partial_file(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    (tmp_path / "copy.db.partial").mkdir()  # in the way: the copy cannot be written there
    result = cli.run("db", "backup", str(target))
    assert result.returncode == 1
    assert f"error: the copy could not be written to {target}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not target.exists()


def test_restore_of_a_missing_file_or_a_folder_says_so(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    result = cli.run("db", "restore", str(missing))
    assert result.returncode == 1
    assert f"error: {missing} does not exist" in result.stderr
    result = cli.run("db", "restore", str(tmp_path))
    assert result.returncode == 1
    assert f"error: {tmp_path} is a folder" in result.stderr
