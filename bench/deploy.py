"""A throwaway deployment of the service: database, keys, var dir, and how to start it."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from tests.dbtools import reset_postgres

from bench.procs import BIN, PYTHON, Proc, free_port
from controlcenter.cli import cpu_count

# The same server settings for the service and its baseline: `controlcenter serve`'s default of
# one process per core (cli.cpu_count), uvicorn's defaults otherwise, as `controlcenter serve`
# passes them (host, port, workers, log level, proxy headers).
WORKERS = cpu_count()
LOG_LEVEL = "warning"
# SIGTERM to SIGKILL when a section is done with the service or the bare app: nothing is measured
# after, and a graceful stop would wait out the outbox's 5 s CRM calls (10 s of every onboarding
# section) or the last streams' drain.
STOP_GRACE_S = 1.0


@dataclass(frozen=True)
class Options:
    quick: bool = False  # shorter runs, for a smoke test
    profile_dir: Path | None = None  # py-spy profiles of the service under load go here


@dataclass
class Deployment:
    db_kind: str  # "sqlite" or "postgres"
    database_url: str
    var_dir: Path
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(48))
    fernet_key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    # What sections of one group (cli.GROUPS) share, by name: a started service and its fakes,
    # entered on `resources` and stopped by `close()` once the group's last section is done.
    shared: dict[str, Any] = field(default_factory=dict)
    resources: ExitStack = field(default_factory=ExitStack)

    @classmethod
    def create(cls, db_kind: str, postgres_url: str | None = None) -> Deployment:
        var_dir = Path(tempfile.mkdtemp(prefix=f"bench-{db_kind}-"))
        if db_kind == "sqlite":
            url = f"sqlite+aiosqlite:///{var_dir / 'controlcenter.db'}"
        else:
            if not postgres_url:
                raise RuntimeError("postgres run without TEST_DATABASE_URL")
            url = postgres_url
            asyncio.run(reset_postgres(url))
        return cls(db_kind=db_kind, database_url=url, var_dir=var_dir)

    def close(self) -> None:
        """Stops what the sections started, then removes the throwaway directory (the SQLite
        database and its files: ~25 MB a run, left in the temporary directory otherwise)."""
        self.shared.clear()
        try:
            self.resources.close()
        finally:
            shutil.rmtree(self.var_dir, ignore_errors=True)

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "DATABASE_URL": self.database_url,
            "SECRET_KEY": self.secret_key,
            "SETTINGS_ENCRYPTION_KEY": self.fernet_key,
            "VAR_DIR": str(self.var_dir),
            "LOG_LEVEL": LOG_LEVEL.upper(),
            **(extra or {}),
        }

    def service(self, extra_env: Mapping[str, str] | None = None) -> tuple[Proc, str]:
        """`controlcenter serve` on a free port (migrations, API and outbox worker)."""
        port = free_port()
        argv = [str(BIN / "controlcenter"), "serve", "--host", "127.0.0.1", "--port", str(port)]
        # No --workers: the benchmarks run the default (one process per core), unless
        # BENCH_WORKERS asks for a number (to compare with a single process).
        if os.environ.get("BENCH_WORKERS"):
            argv += ["--workers", os.environ["BENCH_WORKERS"]]
        service = Proc("service", argv, self.env(extra_env), grace_s=STOP_GRACE_S)
        return service, f"http://127.0.0.1:{port}"


def bare_app(path: str, body: str) -> tuple[Proc, str]:
    """The bare Starlette baseline under the same uvicorn settings as the service."""
    port = free_port()
    argv = [PYTHON, "-m", "uvicorn", "bench.bare:app", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--workers", str(WORKERS), "--log-level", LOG_LEVEL]
    argv += ["--proxy-headers"]
    env = {"BENCH_BARE_PATH": path, "BENCH_BARE_BODY": body}
    return Proc("bare", argv, env, grace_s=STOP_GRACE_S), f"http://127.0.0.1:{port}"
