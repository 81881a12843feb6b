"""`python -m bench` (what `make bench` runs): every measurement, one table.

    make bench BENCH_ARGS="--only dashboard,chat --db sqlite --quick --record"

The service runs as a real `controlcenter serve` subprocess on a throwaway database, loaded
from other processes, and each figure is printed beside a baseline measured in the same run:
the machine is shared and noisy, so ratios count. Sections run one after the other, never two
at once (they would share the cores); dashboard and chat, in that order, share one deployment
per database (`GROUPS`). The service is measured only once every worker has started and gone
idle, after warm-up chats that reach each of them. Each step prints its wall time and the CPU
time every running process used over it (bench/timeline.py); each section its wall time; the
run its total. Only 127.0.0.1 is ever contacted.

PostgreSQL runs in a child process under scripts/with-postgres.sh (a throwaway server on
127.0.0.1, started in about 1.3 s); its rows come back as JSON and join the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench import chat, chat_storage, dashboard, onboarding, peers, slow_clients
from bench.deploy import Deployment, Options
from bench.procs import PYTHON, ROOT
from bench.results import Row, table
from bench.system import machine

Section = Callable[[Deployment, Options], list[Row]]
# Wall seconds by what took them ("sqlite chat", "postgres start-up"), printed at the end.
Times = dict[str, float]

SECTIONS: dict[str, Section] = {
    "dashboard": dashboard.run,
    "chat": chat.run,
    "peers": peers.run,
    "chat_streams": chat.run_streams,
    "chat_readers": chat.run_readers,
    "chat_storage": chat_storage.run,
    "onboarding": onboarding.run,
    "slow_clients": slow_clients.run,
}
# Sections that follow each other in one group share one deployment (database, fakes, one
# started and warmed-up service, settled again before each): a start-up, seeding and warm-up
# measure nothing. The dashboard first, on a fresh service; the chat's figures are deltas (CPU)
# or per chat. The held streams keep a service of their own: after the chat levels, memory the
# levels freed would serve the streams and hide ~10 KiB of each one's cost; before the levels,
# streams their clients gave up on would go on in the service, as CPU in the levels' figures.
GROUPS = {"dashboard": "chat", "chat": "chat"}
DBS = ("sqlite", "postgres")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections among {', '.join(SECTIONS)} (default: all)",
    )
    parser.add_argument("--db", choices=[*DBS, "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a smoke test")
    parser.add_argument("--record", action="store_true", help="append the run to BENCHMARKS.md")
    parser.add_argument("--profile", metavar="DIR", help="write py-spy profiles of the service")
    parser.add_argument("--child-json", help=argparse.SUPPRESS)  # the PostgreSQL child's output
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    return args


def run_sections(db_kind: str, args: argparse.Namespace) -> tuple[list[Row], Times]:
    """Each section alone, one after the other: two measured at once would share the cores."""
    rows: list[Row] = []
    times: Times = {}
    deployment: Deployment | None = None
    try:
        for name in args.sections:
            started = time.monotonic()
            print(f"bench: {db_kind} {name} ...", flush=True)
            try:
                group = GROUPS.get(name)
                if deployment is None or group is None or group != deployment.shared.get("group"):
                    if deployment is not None:
                        deployment.close()
                    deployment = Deployment.create(db_kind, os.environ.get("TEST_DATABASE_URL"))
                    deployment.shared["group"] = group
                profile = Path(args.profile) / db_kind if args.profile else None
                rows += SECTIONS[name](deployment, Options(args.quick, profile))
            except Exception as exc:
                traceback.print_exc()
                rows.append(Row(db_kind, name, "n/a", note=f"failed: {exc!r}"[:300]))
                if deployment is not None:  # the next section starts afresh
                    deployment.close()
                    deployment = None
            times[f"{db_kind} {name}"] = time.monotonic() - started
            print(f"bench: {db_kind} {name} done in {times[f'{db_kind} {name}']:.0f}s", flush=True)
    finally:
        if deployment is not None:
            deployment.close()
    return rows, times


def run_postgres(args: argparse.Namespace) -> tuple[list[Row], Times]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        out = Path(tmp) / "rows.json"
        argv = [str(ROOT / "scripts" / "with-postgres.sh"), PYTHON, "-m", "bench"]
        argv += ["--db", "postgres", "--only", ",".join(args.sections), "--child-json", str(out)]
        if args.quick:
            argv.append("--quick")
        if args.profile:
            argv += ["--profile", str(Path(args.profile).resolve())]
        # A deadline for a hung child only: a loaded machine stretches the sections a lot.
        done = subprocess.run(argv, cwd=ROOT, check=False, timeout=3600)
        if done.returncode != 0 or not out.exists():
            failed = Row("postgres", "all", "n/a", note=f"child exited {done.returncode}")
            return [failed], {"postgres (failed)": time.monotonic() - started}
        child = json.loads(out.read_text())
    times: Times = child["times"]
    # The server's start and stop, and the child's own: what the sections do not account for.
    times["postgres start-up"] = time.monotonic() - started - sum(times.values())
    return [Row.from_json(r) for r in child["rows"]], times


def record(rows: list[Row], args: argparse.Namespace) -> None:
    info = machine()
    path = ROOT / "BENCHMARKS.md"
    head = path.read_text() if path.exists() else "# Benchmarks\n"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    entry = (
        f"\n## Run of {when}\n\n"
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM, "
        f"Python {info['python']}, Linux {info['kernel']}. "
        f"Arguments: `{' '.join(sys.argv[1:]) or '(none)'}`.\n\n{table(rows)}\n"
    )
    path.write_text(head.rstrip("\n") + "\n" + entry)
    print(f"bench: recorded in {path}")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child_json:
        rows, times = run_sections(args.db, args)
        child = {"rows": [r.to_json() for r in rows], "times": times}
        Path(args.child_json).write_text(json.dumps(child))
        return
    started = time.monotonic()
    runs = []
    if args.db in ("sqlite", "both"):
        runs.append(run_sections("sqlite", args))
    if args.db in ("postgres", "both"):
        runs.append(run_postgres(args))
    rows = [row for run_rows, _ in runs for row in run_rows]
    times = {what: seconds for _, run_times in runs for what, seconds in run_times.items()}
    print()
    print(table(rows))
    print()
    for what, seconds in times.items():
        print(f"bench: {what}: {seconds:.0f}s")
    print(f"bench: {time.monotonic() - started:.0f}s in all")
    if args.record:
        record(rows, args)
