"""Dashboard index throughput and latency under wrk, against a bare Starlette app, with the CPU
time each request cost the service and, on PostgreSQL, the database server (both run on the
same cores as the load: the CPU per request is what stays comparable on a shared machine).

Each credential kind (bearer session JWT, basic + API token, basic + account password) gets
`wrk -t1 -c64` for 4 s (`--quick` 3 s) after a 1 s warm-up, against the service the chat
section uses next, started, warmed up and idle. The baseline is a bare Starlette app
(bench/bare.py) answering the service's own bytes on the same path under the same uvicorn
settings (`serve`'s default of one process per core, log level warning, proxy headers). The
targets: bearer at least 60% of the bare app's requests per second; each basic kind at least
80% of bearer's (a password costs Argon2 once, then the verified-credential cache answers).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import httpx
from sqlalchemy.engine import make_url

from bench.chat import _serving as chat_service
from bench.deploy import Deployment, Options, bare_app
from bench.procs import Profiler, cpu_seconds
from bench.results import Row, ms, pct
from bench.seed import seed_accounts
from bench.system import ensure_debian_tool
from bench.timeline import step

LUA = Path(__file__).with_name("report.lua")
CONNECTIONS = 64


@dataclass(frozen=True)
class WrkResult:
    rps: float
    p50_s: float
    p99_s: float
    requests: int
    errors: int
    cpu_us: dict[str, float] = field(default_factory=dict)  # CPU per request, by process

    def figure(self) -> str:
        if self.requests == 0:  # wrk reports zero latencies then, which would read as fast
            return f"n/a: no request completed in the window ({self.errors} errors)"
        rate = f"{self.rps:,.1f}" if self.rps < 10 else f"{self.rps:,.0f}"
        return f"{rate} req/s, p50 {ms(self.p50_s)}, p99 {ms(self.p99_s)}"


def wrk(url: str, headers: Mapping[str, str], seconds: float) -> WrkResult:
    """One wrk run at 64 connections from one thread (the second core serves)."""
    argv = [ensure_debian_tool("wrk"), "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s"]
    argv += ["--timeout", "10s", "-s", str(LUA)]
    for name, value in headers.items():
        argv += ["-H", f"{name}: {value}"]
    argv.append(url)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=True)
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no report:\n{out.stdout}\n{out.stderr}")
    data = json.loads(line.removeprefix("BENCH_JSON "))
    errors = sum(data[k] for k in ("connect", "read", "write", "status", "timeout"))
    return WrkResult(
        rps=data["requests"] / (data["duration_us"] / 1e6),
        p50_s=data["p50_us"] / 1e6,
        p99_s=data["p99_us"] / 1e6,
        requests=data["requests"],
        errors=errors,
    )


class CpuPerRequest:
    """`wrk`, plus the CPU time of these processes (each with the processes below it) over
    the run, divided by its requests."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self._pids = pids

    def wrk(self, url: str, headers: Mapping[str, str], seconds: float) -> WrkResult:
        before = {name: _cpu_seconds(pid) for name, pid in self._pids.items()}
        result = wrk(url, headers, seconds)
        spent = {name: _cpu_seconds(pid) - before[name] for name, pid in self._pids.items()}
        result.cpu_us.update(
            {name: s / result.requests * 1e6 for name, s in spent.items() if result.requests}
        )
        return result


def _cpu_seconds(pid: int) -> float:
    """`cpu_seconds`, plus what `pid`'s children that ended have used (the kernel adds it to
    their parent when it reaps them): a worker restarted or a backend that ended during the
    run would otherwise take its CPU time out of the sum."""
    stat = _stat(pid)
    return cpu_seconds(pid) + (int(stat[13]) + int(stat[14])) / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command's name: state first."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def postgres_server_pid(database_url: str) -> int:
    """The PostgreSQL server's main process (the backends are its children)."""

    async def parent_of_backend() -> int:
        url = make_url(database_url).set(drivername="postgresql")
        connection = await asyncpg.connect(url.render_as_string(hide_password=False))
        try:  # read while the backend lives: it ends with the connection
            backend = await connection.fetchval("SELECT pg_backend_pid()")
            return int(_stat(backend)[1])
        finally:
            await connection.close()

    return asyncio.run(parent_of_backend())


def _slug(mode: str) -> str:
    """ "basic + API token" -> "basic-api-token": each mode's profile a file of its own."""
    return "-".join(mode.split(" (")[0].replace("+", " ").lower().split())


def _basic(user: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def run(deployment: Deployment, options: Options) -> list[Row]:
    seconds = 3 if options.quick else 4
    db = deployment.db_kind
    (account,) = asyncio.run(
        seed_accounts(deployment.database_url, deployment.secret_key, "dash", 1)
    )
    app_id = "dashboard"
    path = f"/ocs/v2.php/apps/{app_id}/api"
    ocs = {"OCS-APIRequest": "true"}
    modes = {
        "bearer (session JWT)": {"Authorization": f"Bearer {account.session}"},
        "basic + API token": {"Authorization": _basic(account.email, account.api_token)},
        "basic + password": {"Authorization": _basic(account.email, account.password)},
    }
    results: dict[str, WrkResult] = {}
    # The service the chat sections use next (cli.GROUPS), started, warmed up and idle; the
    # chat's fakes and users do not take part in a dashboard request.
    with chat_service(deployment) as (service, service_url, _, _):
        pids = {"service": service.pid}
        if db == "postgres":
            pids["PostgreSQL"] = postgres_server_pid(deployment.database_url)
        cpu = CpuPerRequest(pids)
        first = httpx.get(service_url + path, headers={**ocs, **modes["bearer (session JWT)"]})
        if first.status_code != 200:
            return [Row(db, "dashboard index", "n/a", note=f"answered {first.status_code}")]
        body = first.text
        for mode, headers in modes.items():
            check = httpx.get(service_url + path, headers={**ocs, **headers}, timeout=30)
            if check.status_code != 200:
                results[mode] = WrkResult(0, 0, 0, 0, 1)
                continue
            wrk(service_url + path, {**ocs, **headers}, 1)  # warm-up
            # As long as the others: with the verified-credential cache a password costs
            # Argon2 once, and in 2 s runs the ratio to bearer moved 73-91% between runs.
            with Profiler(service.pid, options.profile_dir, f"dashboard-{_slug(mode)}"):
                results[mode] = cpu.wrk(service_url + path, {**ocs, **headers}, seconds)
    bare, bare_url = bare_app(path, body)
    with bare:
        with step("bare app answered"):
            bare.wait_http(bare_url + "/healthz")
        wrk(bare_url + path, ocs, 1)
        baseline = CpuPerRequest({"bare": bare.pid}).wrk(bare_url + path, ocs, seconds)

    rows = [Row(db, "dashboard: bare Starlette", baseline.figure(), note=_note(baseline))]
    bearer = results["bearer (session JWT)"]
    for mode, result in results.items():
        ratio = result.rps / baseline.rps if baseline.rps else 0.0
        row = Row(
            db,
            f"dashboard: {mode}",
            result.figure(),
            baseline=f"bare {baseline.rps:,.0f} req/s",
            ratio=pct(ratio),
            note=_note(result),
        )
        if mode.startswith("bearer"):
            row.target, row.met = ">= 60% of bare", ratio >= 0.6 and not result.errors
        else:  # basic with an API token or the account password (verified-credential cache)
            vs_bearer = result.rps / bearer.rps if bearer.rps else 0.0
            row.baseline += f"; bearer {bearer.rps:,.0f} req/s"
            row.ratio += f" of bare; {pct(vs_bearer)} of bearer"
            row.target, row.met = ">= 80% of bearer", vs_bearer >= 0.8 and not result.errors
        rows.append(row)
    return rows


def _note(result: WrkResult) -> str:
    cpu = [f"{name} {us:,.0f} us" for name, us in result.cpu_us.items()]
    errors = [f"{result.errors} errors of {result.requests:,} requests"] if result.errors else []
    return "; ".join([*(["CPU per request: " + ", ".join(cpu)] if cpu else []), *errors])


def wrk_available() -> bool:
    return shutil.which("wrk") is not None
