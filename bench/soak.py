"""The soak: a long run of mixed load against two instances on PostgreSQL, to show that memory
stays flat and latency does not drift (never part of `make test`; `make soak`).

    scripts/with-postgres.sh python -m bench.soak [--seconds S] [--rate R] [--onboarding-rate R]

Two `controlcenter serve` instances share one PostgreSQL database and the fakes of `make
bench` (provider, MCP server, CRM). Load arrives open-loop, alternating the instances:

- chats with tools (each: 3 provider calls and 2 MCP tool calls) at `--rate` per second, half
  the chat capacity `make bench` measures on PostgreSQL by default;
- the dashboard index (HTTP basic with an API token) at the chat rate (so that its p99 per
  minute rests on hundreds of requests, not on its few slowest);
- a resumed stream (a chat cut after `message_start`, read again with `Last-Event-ID` from
  the other instance) at a quarter of the chat rate;
- onboarding saves at `--onboarding-rate` (1 a second): each queues two or three CRM jobs
  of ~2.5 requests, which the outbox delivers within HighLevel's 10 requests/s for the
  agency's one location; a faster rate only grows the queue, minute after minute;
- the host's baseline: the index's path on a bare Starlette app (`bench.bare`, its own
  processes beside the instances) at the index's rate, kind `bare`. It does no work of its
  own, so its p99 per minute moves only with the host (the load's CPU on the same cores,
  the VM's neighbours): a minute where it rises with the others is the host's.

It prints the RSS of every process of both instances at the start and at the end, then one line
per minute: requests, p99 by kind, errors; then, per kind, how far the minutes' p99 strays
from their median (the target: within 20%); and every error's text once with its count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource, aconnect_sse

from bench.chat_client import CHAT_PATH, EXPECTED_TOOL_CALLS
from bench.deploy import Deployment, bare_app
from bench.fakes import FakeProc, running
from bench.procs import Proc, process_tree, rss_kib
from bench.seed import Account, seed_service
from bench.timeline import step

DEFAULT_SECONDS = 1200.0
# Half of the PostgreSQL chat capacity BENCHMARKS.md reports (25 chats/s on the reference host).
DEFAULT_RATE = 12.5
DEFAULT_ONBOARDING_RATE = 1.0
PROVIDER_DELAY_S = 0.2
CRM_DELAY_S = 0.2
USERS = 200
INDEX_PATH = "/ocs/v2.php/apps/dashboard/api"
ONBOARDING = {"yearsInBusiness": "5", "gciLast12Months": "100k", "crmPainPoints": ["follow-up"]}


@dataclass
class Sample:
    kind: str
    minute: int
    seconds: float
    error: str | None


@dataclass
class Soak:
    urls: list[str]
    accounts: list[Account]
    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    turn: int = 0

    def next(self) -> tuple[str, str, Account]:
        """The instance and the other one, and the user, of the next request (round robin)."""
        self.turn += 1
        first = self.urls[self.turn % 2]
        return first, self.urls[(self.turn + 1) % 2], self.accounts[self.turn % len(self.accounts)]

    async def timed(self, kind: str, work: Awaitable[str | None]) -> None:
        began = time.monotonic()
        try:
            error = await work
        except Exception as exc:  # every failure is a figure of the run
            error = f"{type(exc).__name__}: {exc}"[:200]
        minute = int((began - self.started) // 60)
        self.samples.append(Sample(kind, minute, time.monotonic() - began, error))


async def chat(http: httpx.AsyncClient, url: str, user: Account) -> str | None:
    headers = {"Authorization": f"Bearer {user.session}"}
    body = {"message": "Soak: what is new?", "provider": "provider_a"}
    async with aconnect_sse(http, "POST", url + CHAT_PATH, json=body, headers=headers) as source:
        message, error = await completed(source, "chat")
    if message is None:
        return error
    results = message.get("toolResults") or []
    ok = len(results) == EXPECTED_TOOL_CALLS and all(r["success"] for r in results)
    return None if ok else f"chat tool results: {results!r}"[:200]


async def resumed(http: httpx.AsyncClient, url: str, other: str, user: Account) -> str | None:
    """A chat cut after its first event, read to its end again from the other instance."""
    headers = {"Authorization": f"Bearer {user.session}"}
    body = {"message": "Soak: resume me", "provider": "provider_a"}
    last_id = ""
    async with aconnect_sse(
        http, "POST", url + CHAT_PATH + "?ids=1", json=body, headers=headers
    ) as source:
        if source.response.status_code != 200:
            return f"resume HTTP {source.response.status_code}"
        async for event in source.aiter_sse():
            last_id = event.id
            break
    if not last_id:
        return "resume: no first event"
    message_id = last_id.split(":", 1)[0]
    events = f"{other}{CHAT_PATH}/{message_id}/events"
    resume_headers = {**headers, "Last-Event-ID": last_id}
    async with aconnect_sse(http, "GET", events, headers=resume_headers) as source:
        _, error = await completed(source, "resume events")
    return error


async def completed(source: EventSource, what: str) -> tuple[dict[str, Any] | None, str | None]:
    """The chat's finished message read off `source`, or why there is none."""
    if source.response.status_code != 200:
        return None, f"{what} HTTP {source.response.status_code}"
    async for event in source.aiter_sse():
        data = json.loads(event.data)
        if data["type"] == "error":
            return None, f"{what} error event: {data.get('error')}"
        if data["type"] == "message_complete":
            return data["message"], None
    return None, f"{what} ended without message_complete"


async def onboarding(http: httpx.AsyncClient, url: str, user: Account) -> str | None:
    headers = {"Authorization": f"Bearer {user.session}"}
    response = await http.post(url + "/api/v1/onboarding", json=ONBOARDING, headers=headers)
    return None if response.status_code == 200 else f"onboarding HTTP {response.status_code}"


async def index(http: httpx.AsyncClient, url: str, user: Account) -> str | None:
    headers = {"OCS-APIRequest": "true"}
    auth = httpx.BasicAuth(user.email, user.api_token)
    response = await http.get(url + INDEX_PATH, headers=headers, auth=auth)
    return None if response.status_code == 200 else f"index HTTP {response.status_code}"


async def bare(http: httpx.AsyncClient, url: str) -> str | None:
    response = await http.get(url + INDEX_PATH, headers={"OCS-APIRequest": "true"})
    return None if response.status_code == 200 else f"bare HTTP {response.status_code}"


async def load(
    soak: Soak, seconds: float, rate: float, onboarding_rate: float, bare_url: str
) -> None:
    """Open loop: one chat, one index and one bare GET every 1/rate s, every fourth tick also
    a resumed stream; onboarding saves at `onboarding_rate` a second."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        tasks: set[asyncio.Task[None]] = set()
        tick, saves, started = 0, 0, time.monotonic()
        while time.monotonic() - started < seconds:
            url, other, user = soak.next()
            jobs: list[tuple[str, Awaitable[str | None]]] = [
                ("chat", chat(http, url, user)),
                ("index", index(http, other, user)),
                ("bare", bare(http, bare_url)),
            ]
            if tick % 4 == 0:
                jobs.append(("resumed", resumed(http, url, other, user)))
            if time.monotonic() - started >= saves / onboarding_rate:
                saves += 1
                jobs.append(("onboarding", onboarding(http, url, user)))
            for kind, work in jobs:
                task = asyncio.create_task(soak.timed(kind, work))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            tick += 1
            await asyncio.sleep(max(0.0, started + tick / rate - time.monotonic()))
        if tasks:
            await asyncio.wait(tasks)


def rss_by_process(instances: list[Proc]) -> list[tuple[str, int, int]]:
    """(instance, pid, RSS KiB) of every process of each instance."""
    return [
        (f"instance {n + 1}", pid, rss_kib(pid))
        for n, instance in enumerate(instances)
        for pid in process_tree(instance.pid)
    ]


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def report(soak: Soak, start: list[tuple[str, int, int]], end: list[tuple[str, int, int]]) -> None:
    print("soak: RSS per process (KiB), start -> end")
    ended = {pid: kib for _, pid, kib in end}
    for name, pid, kib in start:
        after = ended.get(pid)
        growth = f"{(after - kib) / kib:+.1%}" if after and kib else "gone"
        print(f"soak:   {name} pid {pid}: {kib} -> {after if after else '-'} ({growth})")
    by_minute: dict[int, list[Sample]] = defaultdict(list)
    for sample in soak.samples:
        by_minute[sample.minute].append(sample)
    kinds = sorted({s.kind for s in soak.samples})
    print("soak: minute, requests, p99 ms by kind, errors")
    for minute in sorted(by_minute):
        rows = by_minute[minute]
        p99s = ", ".join(
            f"{kind} {p99([s.seconds for s in rows if s.kind == kind]) * 1000:.0f}"
            for kind in kinds
        )
        errors = sum(1 for s in rows if s.error)
        print(f"soak:   {minute + 1:3d}  {len(rows):6d}  {p99s}  errors {errors}")
    print("soak: p99 per minute by kind: median, range, farthest from the median")
    p99s_by_kind = {
        kind: {
            minute: p99([s.seconds for s in rows if s.kind == kind]) * 1000
            for minute, rows in sorted(by_minute.items())
            if any(s.kind == kind for s in rows)
        }
        for kind in kinds
    }
    for kind, minutes in p99s_by_kind.items():
        middle = statistics.median(minutes.values())
        farthest = max(_off(m, middle) for m in minutes.values())
        print(
            f"soak:   {kind}: {middle:.0f} ms, {min(minutes.values()):.0f}-"
            f"{max(minutes.values()):.0f} ms, {farthest:.0%} "
            f"({len([s for s in soak.samples if s.kind == kind]) // len(minutes)}"
            " requests a minute)"
        )
    host = set(_strays(p99s_by_kind.get("bare", {})))
    print("soak: minutes whose p99 strays beyond 20% of the kind's median (* the bare app's too)")
    for kind, minutes in p99s_by_kind.items():
        if kind != "bare":
            marked = [f"{m + 1}{'*' if m in host else ''}" for m in _strays(minutes)]
            print(f"soak:   {kind}: {', '.join(marked) or 'none'}")
    counted = Counter(s.error for s in soak.samples if s.error)
    print(f"soak: {len(soak.samples)} requests, {sum(counted.values())} errors")
    for text, count in counted.most_common():
        print(f"soak:   {count} x {text}")


def _off(value: float, middle: float) -> float:
    """How far a minute's p99 is from the median minute's, as a fraction of it."""
    return abs(value - middle) / middle


def _strays(p99s: dict[int, float]) -> list[int]:
    """The minutes whose p99 is more than 20% from the median minute's."""
    if not p99s:
        return []
    middle = statistics.median(p99s.values())
    return [minute for minute, value in p99s.items() if _off(value, middle) > 0.2]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE, help="chats per second")
    parser.add_argument(
        "--onboarding-rate",
        type=float,
        default=DEFAULT_ONBOARDING_RATE,
        help="onboarding saves per second",
    )
    args = parser.parse_args()
    postgres = os.environ.get("TEST_DATABASE_URL")
    if not postgres:
        raise SystemExit("bench.soak runs on PostgreSQL: scripts/with-postgres.sh sets it up")
    deployment = Deployment.create("postgres", postgres)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
            work = Path(tmp)
            llm, mcp = FakeProc("llm", work, PROVIDER_DELAY_S), FakeProc("mcp", work)
            crm = FakeProc("crm", work, CRM_DELAY_S)
            with running(llm, mcp, crm):
                soak(deployment, args, llm, mcp, crm)
    finally:
        deployment.close()


def soak(
    deployment: Deployment, args: argparse.Namespace, llm: FakeProc, mcp: FakeProc, crm: FakeProc
) -> None:
    with step("seeded"):
        settings = {
            "providerAApiKey": llm.info["api_key"],
            "mcpServerUrl": mcp.info["url"],
            "crmOwnerLocationId": crm.info["location_id"],
            "crmPrivateToken": crm.info["private_token"],
            "tagOnboardingComplete": "onboarding-complete",
            "tagHighGCI": "high-gci",
        }
        accounts = asyncio.run(seed_service(deployment, "soak", USERS, settings))
    env = {
        "PROVIDER_A_BASE_URL": llm.info["url"],
        "PROVIDER_MAX_RETRIES": "0",
        "CRM_BASE_URL": crm.info["url"],
    }
    instances, urls = [], []
    for _ in range(2):
        instance, url = deployment.service(env)
        instances.append(instance)
        urls.append(url)
    # One after the other: the first applies the migrations, the second finds them done.
    with instances[0]:
        with step("instance 1 answered"):
            instances[0].wait_http(urls[0] + "/healthz")
        with instances[1]:
            with step("instance 2 answered"):
                instances[1].wait_http(urls[1] + "/healthz")
            host, host_url = bare_app(INDEX_PATH, '{"ocs":{"meta":{"status":"ok"},"data":[]}}')
            with host:
                with step("bare app answered"):
                    host.wait_http(host_url + "/healthz")
                run_load(instances, urls, accounts, args, host_url)


def run_load(
    instances: list[Proc],
    urls: list[str],
    accounts: list[Account],
    args: argparse.Namespace,
    bare_url: str,
) -> None:
    """Warm-up, then the measured run between two RSS readings, then the report."""
    warm_up = Soak(urls, accounts)
    with step("warm-up (30 s at the rate)"):
        asyncio.run(
            load(warm_up, min(30.0, args.seconds), args.rate, args.onboarding_rate, bare_url)
        )
    start = rss_by_process(instances)
    run = Soak(urls, accounts)
    print(f"soak: {args.seconds:g} s at {args.rate:g} chats/s on two instances", flush=True)
    asyncio.run(load(run, args.seconds, args.rate, args.onboarding_rate, bare_url))
    end = rss_by_process(instances)
    report(run, start, end)


if __name__ == "__main__":
    main()
