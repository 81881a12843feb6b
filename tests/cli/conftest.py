"""Run the real `controlcenter` entry point in a subprocess against a throwaway SQLite file."""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controlcenter.db.migrate import upgrade

ENTRY_POINT = Path(sys.executable).parent / "controlcenter"
CLI_TIMEOUT_S = 90  # generous: the suite shares two cores with PostgreSQL and other runs


@dataclass
class Cli:
    workdir: Path
    db_path: Path

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SECRET_KEY", "SETTINGS_ENCRYPTION_KEY", "APP_ID")
        }
        env["DATABASE_URL"] = f"sqlite+aiosqlite:///{self.db_path}"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ENTRY_POINT), *args],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            cwd=self.workdir,
            env=self.env,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )

    def popen(self, *args: str, open_files: int | None = None) -> subprocess.Popen[str]:
        """The command as a process; `open_files`: its soft open-files limit at start."""

        def limit() -> None:
            assert open_files is not None
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

        return subprocess.Popen(
            [str(ENTRY_POINT), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.workdir,
            env=self.env,
            preexec_fn=limit if open_files is not None else None,
        )

    def create_database(self) -> None:
        """What `db upgrade` does, in this process (the commands refuse a missing database)."""
        upgrade(self.env["DATABASE_URL"])

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.db_path)) as conn:
            return list(conn.execute(sql, params))


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    made = Cli(workdir=tmp_path, db_path=tmp_path / "var" / "cli.db")
    made.create_database()
    yield made
