"""Slow clients beside the chat: `/healthz` and lone chats alone, then beside `SLOW` connections
that send nothing or trickle a head or a body (bench/slow_client.py), which the service must
close (a head within 30 s, a stalled body after 30 s); the figures against the first, and how
many of the connections the service closed."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import httpx

from bench.chat import LONE_RATE, READERS_CHATS, _client, _serving, _wait_file, percentile
from bench.deploy import Deployment, Options
from bench.procs import PYTHON, ROOT
from bench.results import Row, ms
from bench.timeline import step

SLOW = 4000
SLOW_QUICK = 600
PROBES = 100  # /healthz requests per side, one after the other
TARGET_SLOWDOWN = 1.10  # each figure beside the slow connections, against it alone: as fast
# Every connection must be closed by then: the 30 s timeouts, a trickle's period, and margin.
GIVE_UP_S = 90.0


def _healthz(url: str) -> list[float]:
    times = []
    with httpx.Client(base_url=url) as client:
        client.get("/healthz")  # the connection, before the measure
        for _ in range(PROBES):
            started = time.perf_counter()
            client.get("/healthz").raise_for_status()
            times.append(time.perf_counter() - started)
    return sorted(times)


def _chats(records: list[dict[str, Any]]) -> tuple[float, int]:
    done = sorted(r["complete"] - r["start"] for r in records if "complete" in r)
    return percentile(done, 50), sum(1 for r in records if r.get("error"))


def run(deployment: Deployment, options: Options) -> list[Row]:
    count = SLOW_QUICK if options.quick else SLOW
    with _serving(deployment) as (_, url, tokens, work):
        health_alone = percentile(_healthz(url), 50)
        alone = _client(url, tokens, READERS_CHATS, work, rate=LONE_RATE, name="slow-alone")
        out = work / "slow"
        out.mkdir(exist_ok=True)
        argv = [PYTHON, "-m", "bench.slow_client", "--url", url, "--count", str(count)]
        argv += ["--give-up", str(GIVE_UP_S), "--dir", str(out)]
        client = subprocess.Popen(argv, cwd=ROOT)
        try:
            with step(f"{count} slow connections opened"):
                _wait_file(out / "held", client)
            health_beside = percentile(_healthz(url), 50)
            beside = _client(url, tokens, READERS_CHATS, work, rate=LONE_RATE, name="slow-beside")
            with step(f"{count} slow connections closed by the service"):
                _wait_file(out / "closed", client, within_s=GIVE_UP_S + 60)
            closed = json.loads((out / "closed").read_text())
        finally:
            client.terminate()
            client.wait(30)
    return _rows(deployment.db_kind, count, health_alone, health_beside, alone, beside, closed)


def _rows(
    db: str,
    count: int,
    health_alone: float,
    health_beside: float,
    alone: list[dict[str, Any]],
    beside: list[dict[str, Any]],
    closed: dict[str, dict[str, Any]],
) -> list[Row]:
    chat_alone, errors_alone = _chats(alone)
    chat_beside, errors_beside = _chats(beside)
    all_closed = sum(k["closed"] for k in closed.values())
    slowest = ", ".join(f"{kind} {k['max_s']:.0f} s" for kind, k in closed.items())
    return [
        Row(
            db,
            f"/healthz beside {count} slow connections (p50 of {PROBES})",
            ms(health_beside),
            baseline=f"{ms(health_alone)} without them",
            ratio=f"{health_beside / health_alone:.2f}x",
            target=f"<= {TARGET_SLOWDOWN:.2f}x",
            met=health_beside <= TARGET_SLOWDOWN * health_alone,
        ),
        Row(
            db,
            f"chat beside {count} slow connections (p50 of {READERS_CHATS} lone chats)",
            f"{ms(chat_beside)}; {errors_beside} errors",
            baseline=f"{ms(chat_alone)} without them; {errors_alone} errors",
            ratio=f"{chat_beside / chat_alone:.2f}x",
            target=f"<= {TARGET_SLOWDOWN:.2f}x",
            met=chat_beside <= TARGET_SLOWDOWN * chat_alone and not errors_beside,
        ),
        Row(
            db,
            f"slow connections closed by the service, of {count}",
            str(all_closed),
            target=f"all, within {GIVE_UP_S:g} s",
            met=all_closed == count,
            note=f"slowest close per kind after opening: {slowest}",
        ),
    ]
