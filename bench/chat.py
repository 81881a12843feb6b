"""Concurrent chat streams against the fake provider, the service's memory while they are open.

The fake provider answers 200 ms after each request arrives (its own parsing and checks inside
them, as a real API's latency holds its own work); replies 1 and 2 ask for `echo_text` of the
fake MCP server, reply 3 is text, so the ideal chat takes 3 x 200 ms: the baseline of every
latency row. The provider and the MCP server run in processes of their own, the chats come
from a client process of their own (httpx + httpx-sse, its connection warmed first). A chat
counts as an error unless it ends with `message_complete` carrying two successful tool
results (a held stream: one text reply).

Three loads, on the service the dashboard used first, settled again:
- chats arriving together (closed loop), x1, x100, x300. x100 and x300 are judged on the p99
  of every chat; x1 on the median of 21 chats each alone (the level's one and `LONE_CHATS`
  lone ones), since one chat's figure moves by 2x between runs. CPU rows: the service's CPU
  time (every process) per chat and per step (a provider or a tool call); x1's from the lone
  chats, less the idle service's, read in nanoseconds (`_lone`), with the fakes' CPU per
  lone chat in the note; beside it, the floor of a step: what the anthropic SDK and the mcp
  client cost by themselves for the last lone chat's calls, made as the service makes them
  (bench/chat_floor.py);
- chats arriving at a steady rate (open loop) for the capacity, the highest rate whose p99
  total stays within 1.25x ideal: short probes from a predicted rate find the knee, one
  full-length run confirms it (`_capacity`);
- in a section of their own (`run_streams`, `--only chat_streams`), 10,000 streams held open
  by a provider that answers after 30 s: errors, and memory per stream ((the service's RSS
  where the most streams are open - its idle RSS) / that number);
- in a section of their own (`run_readers`, `--only chat_readers`), 500 idle readers of the
  events endpoint (`bench.readers_client`) of five answers held by the provider: the median
  of lone chats beside them against the same chats without them, and the service's CPU
  spent on the waiting readers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import tempfile
import time
import traceback
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from math import inf
from pathlib import Path
from typing import Any

from bench import chat_floor
from bench.chat_floor import ChatSettings, Floor
from bench.deploy import WORKERS, Deployment, Options
from bench.fakes import HOLD_MARKER, HOLD_S, FakeProc, running
from bench.procs import (
    PYTHON,
    ROOT,
    RUNNING,
    Proc,
    Profiler,
    RssSampler,
    cpu_seconds,
    precise_cpu_seconds,
    rss_kib,
)
from bench.results import Row, ms, pct
from bench.seed import seed_service
from bench.timeline import step

PROVIDER_DELAY_S = 0.2
PROVIDER_CALLS = 3
# The service's provider and MCP clients for the chat sections (its environment): one attempt
# each, with room for the held streams' 30 s answers.
PROVIDER_TIMEOUT_S = 60.0
PROVIDER_MAX_RETRIES = 0
MCP_TIMEOUT_S = 30.0
IDEAL_S = PROVIDER_DELAY_S * PROVIDER_CALLS
CHAT_USERS = 100
# The targets: message_start and total of a single chat (x1: the median of the chats that ran
# alone, the level's one and the lone ones below: one chat's figure moves between 6 and 12 ms
# from run to run); p99 total of the chats arriving together, as a multiple of the ideal;
# memory per open stream. The ideal counts the provider's delays only: the fake provider
# answers 200 ms after a request arrives, its own checks inside them (tests/fakes/llm.py).
TARGET_START_S = 0.010
TARGET_TOTAL = {1: 1.03, 100: 1.25, 300: 1.5}
TARGET_STREAM_KIB = 20
TOOL_CALLS = 2
# Service CPU per step, a step being one provider call or one tool call of the chat.
TARGET_STEP_CPU_S = 0.0015
# Capacity: the highest open-loop arrival rate (chats/s) whose p99 total stays within
# CAPACITY_FACTOR x ideal over CAPACITY_S seconds. Probes of PROBE_S seconds walk from a
# predicted rate, by PROBE_STEP, until the verdict turns (at most MAX_PROBES); only the chosen
# rate runs the full CAPACITY_S, and one step lower too if that run missed early.
CAPACITY_S = {False: 60.0, True: 10.0}  # by --quick
# The second full-length run follows only a miss known within this share of the first: a
# later miss says the rate is near the capacity, and the host's bursts then decide the next
# run too (it passed after about one such miss in four), at up to a minute more each time; a
# default run then goes over 10 minutes. After an early miss it costs seconds.
SECOND_RUN_WITHIN = 0.25
PROBE_S = {False: 5.0, True: 3.0}
PROBE_STEP = 1.25
MAX_PROBES = 8
CAPACITY_FACTOR = 1.25
LIMIT_S = CAPACITY_FACTOR * IDEAL_S  # a capacity run's p99 limit
# The prediction: this share of the rate x300 sustained, or of what the cores allow at x300's
# CPU per chat with the fakes and the client using as much again, whichever is lower. The 60 s
# knee lies at 0.4-0.65 of the sustained rate: starting at the top walks down three or four
# probes to it, and starting at 0.5 nearly always passes the first probe, which then only
# costs its seconds.
PROBE_START = 0.6
# A highest passing probe whose p99 is above this share of the limit is a close call that a
# 60 s run usually misses: the confirming run takes one step lower.
CLOSE_CALL = 0.9
# The service's CPU per chat by (database, level), as this run measured it: the whole that
# chat_storage's figures are a share of, when that section runs after this one.
CPU_PER_CHAT: dict[tuple[str, int], float] = {}
# x1's p50 total by database, as this run measured it: the peers section charges what it adds
# to the ideal to the chat's provider calls.
LONE_TOTAL: dict[str, float] = {}
# x1's CPU: a lone chat is ~20-40 ms of CPU. This many lone chats, one each 0.8 s (each alone:
# a lone chat takes ~0.63 s), less what the idle service uses over as long, read in
# nanoseconds (`precise_cpu_seconds`; the 10 ms ticks read the same within 1-3%). 20, not 10:
# the first seconds after the warm-up cost more, and 10 chats read ~5 ms more per chat;
# chat_storage's x1 share is a share of this figure.
LONE_CHATS = 20
LONE_RATE = 1.25
# The idle service's CPU is measured over this long at most and scaled to the lone chats' time:
# a steady trickle (the outbox's poll each second, ~8 ms of CPU a second in all); even 20% off,
# the lone chats' 16 s of it is off by ~0.1 ms per chat.
LONE_IDLE_S = 3.0
# Open streams: how many are held open at once (by --quick).
OPEN_STREAMS = {False: 10_000, True: 2_000}
STREAMS_SAMPLE_S = 0.25  # RSS samples while they are held (each reads every process's /proc)
# The held streams' client, lean: its CPU shares the two cores with the service's and sets the
# pace of the 10,000 streams' ramp and ends. httpx with httpx-sse costs ~3 ms of the client's
# CPU per stream (30 s for 10,000), so each chat has a socket of its own with HTTP and SSE read
# by hand (`chat_client.one_raw_chat`). The chat levels keep httpx, their figures comparable.


@dataclass
class Level:
    chats: int
    records: list[dict[str, Any]]
    samples: list[tuple[float, int]]
    idle_kib: int
    cpu_s: float  # the service's CPU time (every process) while the level ran; x1: `_lone`'s
    fakes_cpu_s: dict[str, float] = field(
        default_factory=dict
    )  # x1: each fake's CPU per chat (`_lone`); else empty

    @property
    def errors(self) -> list[str]:
        return [r["error"] for r in self.records if r.get("error")]

    def latencies(self, key: str) -> list[float]:
        return sorted(r[key] - r["start"] for r in self.records if key in r)

    @property
    def peak_kib(self) -> int:
        return max((kib for _, kib in self.samples), default=self.idle_kib)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))
    return values[index]


@dataclass
class Capacity:
    rate: float
    seconds: float
    records: list[dict[str, Any]]

    @property
    def errors(self) -> int:
        return sum(1 for r in self.records if r.get("error"))

    @property
    def p99(self) -> float:
        return percentile(
            sorted(r["complete"] - r["start"] for r in self.records if "complete" in r), 99
        )

    @property
    def unstarted(self) -> int:
        """Chats the client did not start: it gave up once the verdict was a miss."""
        return sum(1 for r in self.records if "start" not in r)

    @property
    def met(self) -> bool:
        return self.errors == 0 and self.p99 <= LIMIT_S and not self.unstarted

    @property
    def ran_s(self) -> float:
        """From its first chat's start to its last's: `seconds`, unless it gave up sooner."""
        starts = [r["start"] for r in self.records if "start" in r]
        return max(starts) - min(starts) if starts else 0.0

    def summary(self) -> str:
        if self.unstarted:
            slow = sum(
                1 for r in self.records if r.get("complete", 0) - r.get("start", 0) > LIMIT_S
            )
            return (
                f"{self.rate:g}/s: missed, given up after {len(self.records) - self.unstarted} "
                f"of {len(self.records)} chats ({self.errors} errors, {slow} over {ms(LIMIT_S)})"
            )
        return f"{self.rate:g}/s: p99 {ms(self.p99)}, {self.errors} errors"


def give_up_after(chats: int) -> int:
    """How many chats over the limit put the p99 of `chats` over it whatever the others do
    (`percentile`'s rank)."""
    rank = min(chats - 1, max(0, round(99 / 100 * chats + 0.5) - 1))
    return chats - rank


@dataclass
class CapacitySearch:
    predicted: float  # chats/s where the probes start (`_predicted`)
    full_s: float  # the length of a confirming run
    probes: list[Capacity]
    confirms: list[Capacity]  # full-length runs: the highest probe that passed, then lower

    @property
    def confirmed(self) -> Capacity | None:
        return next((c for c in self.confirms if c.met), None)


def run(deployment: Deployment, options: Options) -> list[Row]:
    levels = (1, 100, 300)
    floor: Floor | str = "not measured"
    with _serving(deployment) as (service, url, tokens, work):
        results = []
        for chats in levels:
            idle = rss_kib(service.pid)
            cpu_before = cpu_seconds(service.pid)
            with (
                RssSampler(service.pid) as sampler,
                Profiler(service.pid, options.profile_dir, f"chat-{chats}"),
            ):
                records = _client(url, tokens, chats, work)
            cpu = cpu_seconds(service.pid) - cpu_before
            fakes: dict[str, float] = {}
            if chats == 1:
                with Profiler(service.pid, options.profile_dir, "chat-lone"):
                    lone = _lone(service.pid, url, tokens, work)
                records += lone.records
                cpu, fakes = lone.cpu_s.pop("service"), lone.cpu_s
                floor = _floor(deployment, work, options.quick)
            results.append(Level(chats, records, sampler.samples, idle, cpu, fakes))
        capacity = _capacity(service, url, tokens, work, options.quick, results[-1])
    return [
        *_rows(deployment.db_kind, results, floor),
        *_capacity_rows(deployment.db_kind, capacity),
    ]


# The chat's fakes (llm, mcp) in `Deployment.shared`, while they run.
FAKES = "chat fakes"


def _floor(deployment: Deployment, work: Path, quick: bool) -> Floor | str:
    """The floor of a step from the lone chat that ran last (`chat_floor`), or why it could not
    be measured: the levels' figures stand without it."""
    llm, mcp = deployment.shared[FAKES]
    settings = ChatSettings(
        llm.info["api_key"], PROVIDER_TIMEOUT_S, PROVIDER_MAX_RETRIES, MCP_TIMEOUT_S
    )
    try:
        return chat_floor.measure(llm, mcp.info["url"], settings, work, quick)
    except Exception as exc:
        traceback.print_exc()
        return f"failed: {exc!r}"[:300]


@contextmanager
def _serving(deployment: Deployment) -> Iterator[tuple[Proc, str, Path, Path]]:
    """The fakes, the chat users and the settings, the service warmed up and idle: (service,
    URL, the users' tokens file, a work directory). Started once per deployment: the sections
    that share it (cli.GROUPS) each get it settled again; `deployment.close()` stops it."""
    served: tuple[Proc, str, Path, Path] | None = deployment.shared.get("chat")
    if served is None:
        served = deployment.resources.enter_context(_started(deployment))
        deployment.shared["chat"] = served
    else:
        with step("service settled again"):
            served[0].wait_settled()
    yield served


@contextmanager
def _started(deployment: Deployment) -> Iterator[tuple[Proc, str, Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
        work = Path(tmp)
        llm, mcp = FakeProc("llm", work, PROVIDER_DELAY_S), FakeProc("mcp", work)
        with running(llm, mcp):
            with step("seeded"):
                settings = {
                    "providerAApiKey": llm.info["api_key"],
                    "mcpServerUrl": mcp.info["url"],
                }
                accounts = asyncio.run(seed_service(deployment, "chat", CHAT_USERS, settings))
            tokens = work / "tokens.json"
            tokens.write_text(json.dumps([a.session for a in accounts]))
            env = {
                "PROVIDER_A_BASE_URL": llm.info["url"],
                "PROVIDER_MAX_RETRIES": str(PROVIDER_MAX_RETRIES),
                "PROVIDER_TIMEOUT_S": f"{PROVIDER_TIMEOUT_S:g}",
                "MCP_TIMEOUT_S": f"{MCP_TIMEOUT_S:g}",
            }
            deployment.shared[FAKES] = (llm, mcp)
            service, url = deployment.service(env)
            with service:
                with step("service answered"):
                    service.wait_http(url + "/healthz")
                with step("service settled"):
                    service.wait_settled()
                # Warm-up, enough chats at once to reach every worker: lazy imports, pools,
                # the MCP tool list.
                with step("warm-up chats"):
                    _client(url, tokens, 4 * WORKERS, work)
                with step("service settled after warm-up"):
                    service.wait_settled()
                yield service, url, tokens, work


@dataclass(frozen=True)
class Lone:
    """The lone chats (`LONE_CHATS`): the CPU time of one, by process (the service's and the
    fakes', idle less), and their records."""

    cpu_s: dict[str, float]
    records: list[dict[str, Any]]


def _lone(pid: int, url: str, tokens: Path, work: Path) -> Lone:
    # The fakes' CPU too: theirs is on a lone chat's path as well (the provider parses and
    # checks each 25 KB request, the MCP server runs each tool call), so x1's total over the
    # ideal holds it.
    pids = {"service": pid} | {name: p for p, name in RUNNING.items() if name.startswith("fake-")}

    def read() -> dict[str, float]:
        return {name: precise_cpu_seconds(p) for name, p in pids.items()}

    started, before = time.monotonic(), read()
    records = _client(url, tokens, LONE_CHATS, work, rate=LONE_RATE, name="lone")
    after, took = read(), time.monotonic() - started
    idle_s = min(took, LONE_IDLE_S)
    quiet = read()
    time.sleep(idle_s)
    rested = read()
    cpu = {
        name: (after[name] - before[name] - (rested[name] - quiet[name]) * took / idle_s)
        / LONE_CHATS
        for name in pids
    }
    return Lone(cpu, records)


def _capacity(
    service: Proc, url: str, tokens: Path, work: Path, quick: bool, burst: Level
) -> CapacitySearch:
    """Probes walk from the predicted rate until the verdict turns; the highest rate that
    passed (one step lower if its p99 was a close call) is then run at full length, and one
    step lower if that run missed early (`SECOND_RUN_WITHIN`). A run after one that missed
    starts once the service has settled: what an overloaded run left behind (its last chats'
    writes, the garbage) is not the next run's load."""
    runs: list[Capacity] = []

    def at(rate: float, seconds: float) -> Capacity:
        if runs and not runs[-1].met:
            service.wait_settled()
        name = f"rate-{rate:g}-{seconds:g}s"
        chats = round(rate * seconds)
        # The client stops starting chats once the verdict is a miss: a 60 s run that misses
        # would cost a minute of the bench's wall time for a verdict known after seconds.
        give_up = (give_up_after(chats), LIMIT_S)
        records = _client(url, tokens, chats, work, rate=rate, name=name, give_up=give_up)
        tried = Capacity(rate, seconds, records)
        runs.append(tried)
        print(f"bench:   capacity {tried.summary()} over {seconds:g} s", flush=True)
        return tried

    search = CapacitySearch(_predicted(burst), CAPACITY_S[quick], [], [])
    rate = _rounded(search.predicted)
    while len(search.probes) < MAX_PROBES:
        search.probes.append(at(rate, PROBE_S[quick]))
        if len(search.probes) > 1 and search.probes[-1].met != search.probes[-2].met:
            break
        rate = _rounded(rate * PROBE_STEP if search.probes[-1].met else rate / PROBE_STEP)
    passed = [p for p in search.probes if p.met]
    if passed:
        best = max(passed, key=lambda p: p.rate)
        close = best.p99 > CLOSE_CALL * LIMIT_S
        rate = _rounded(best.rate / PROBE_STEP) if close else best.rate
        first = at(rate, search.full_s)
        search.confirms.append(first)
        if not first.met and first.ran_s <= SECOND_RUN_WITHIN * search.full_s:
            search.confirms.append(at(_rounded(rate / PROBE_STEP), search.full_s))
    return search


def _predicted(burst: Level) -> float:
    """Where the probes start (`PROBE_START`)."""
    by_cpu = WORKERS / (2 * burst.cpu_s / burst.chats) if burst.cpu_s > 0 else inf
    return PROBE_START * min(_sustained(burst), by_cpu)


def _sustained(level: Level) -> float:
    """Chats per second a closed-loop level completed, from its first start to its last end:
    what the service, the fakes and the client together got through on these cores."""
    done = [r for r in level.records if "complete" in r]
    if not done:
        return 1.0
    span = max(r["complete"] for r in done) - min(r["start"] for r in done)
    return len(done) / span if span > 0 else 1.0


def _rounded(rate: float) -> float:
    """Two significant figures at most: finer rates than that are within the noise."""
    return max(1.0, float(f"{rate:.2g}"))


def _client(
    url: str,
    tokens: Path,
    chats: int,
    work: Path,
    *,
    rate: float | None = None,
    message: str | None = None,
    tools: int | None = None,
    name: str | None = None,
    lean: bool = False,
    give_up: tuple[int, float] | None = None,
) -> list[dict[str, Any]]:
    out = work / f"chat-{name or chats}.json"
    # Time enough for every chat to arrive, be held, and finish.
    limit_s = 120 + (chats / rate if rate else 0) + (HOLD_S if message else 0)
    argv = [PYTHON, "-m", "bench.chat_client", "--url", url, "--tokens", str(tokens)]
    argv += ["--chats", str(chats), "--timeout", str(limit_s), "--out", str(out)]
    if rate is not None:
        argv += ["--rate", str(rate)]
    if message is not None:
        argv += ["--message", message]
    if tools is not None:
        argv += ["--tools", str(tools)]
    if lean:
        argv += ["--raw", "--uvloop"]
    if give_up is not None:
        argv += ["--give-up", str(give_up[0]), str(give_up[1])]
    with step(f"chat client {out.stem} (its start, the chats, their drain)"):
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=limit_s + 60)
    if done.returncode != 0:
        raise RuntimeError(f"chat client failed:\n{done.stderr[-3000:]}")
    records: list[dict[str, Any]] = json.loads(out.read_text())
    print(f"bench:     {_spread(records)}", flush=True)
    return records


def _spread(records: list[dict[str, Any]]) -> str:
    """When the chats started, got their headers and ended, from the first start: where a
    client's wall time went (the ramp, the chats, the drain)."""
    first = min((r["start"] for r in records if "start" in r), default=0.0)

    def span(key: str) -> str:
        times = [r[key] - first for r in records if key in r]
        return f"{min(times):.1f}-{max(times):.1f}" if times else "none"

    spans = {"starts": "start", "headers": "headers", "ends": "end"}
    return "from the first start (s): " + ", ".join(f"{n} {span(k)}" for n, k in spans.items())


def _rows(db: str, levels: list[Level], floor: Floor | str) -> list[Row]:
    rows: list[Row] = []
    for level in levels:
        n = level.chats
        starts, totals = level.latencies("message_start"), level.latencies("complete")
        s50, s99 = percentile(starts, 50), percentile(starts, 99)
        t50, t99 = percentile(totals, 50), percentile(totals, 99)
        errors = level.errors
        note = f"{len(errors)} errors, first: {errors[0]}" if errors else ""
        # x1 is every chat that ran alone (the level's and the lone ones): its target is a
        # chat's, judged on their median; the others' on their p99, every chat counted.
        of = f" ({len(level.records)} chats, each alone)" if n == 1 else ""
        judged = "p50" if n == 1 else "p99"
        start_row = Row(
            db,
            f"chat x{n}: to message_start",
            f"p50 {ms(s50)}, p99 {ms(s99)}{of}",
            baseline=f"target {ms(TARGET_START_S)}",
            note=note,
        )
        total_row = Row(
            db,
            f"chat x{n}: total",
            f"p50 {ms(t50)}, p99 {ms(t99)}; {len(errors)} errors{of}",
            baseline=f"ideal {ms(IDEAL_S)}",
            ratio=f"p50 +{pct(t50 / IDEAL_S - 1)}, p99 +{pct(t99 / IDEAL_S - 1)}",
        )
        if level.fakes_cpu_s:
            fakes = ", ".join(f"{name} {ms(s)}" for name, s in level.fakes_cpu_s.items())
            total_row.note = f"The fakes' CPU per lone chat (idle less), on its path too: {fakes}."
        if n == 1:
            LONE_TOTAL[db] = t50
            start_row.target = f"p50 <= {ms(TARGET_START_S)}"
            start_row.met = s50 <= TARGET_START_S and not errors
        factor = TARGET_TOTAL.get(n)
        if factor is not None:
            total_row.target = f"{judged} <= {factor}x ideal"
            total = t50 if n == 1 else t99
            total_row.met = total <= IDEAL_S * factor and not errors
        per_chat = level.cpu_s / n
        CPU_PER_CHAT[(db, n)] = per_chat
        per_step = per_chat / (PROVIDER_CALLS + TOOL_CALLS)
        lone = f" ({LONE_CHATS} lone chats in turn, idle less)" if n == 1 else ""
        cpu_row = Row(
            db,
            f"chat x{n}: service CPU",
            f"{ms(per_chat)} per chat, {ms(per_step)} per step{lone}",
            baseline=f"{PROVIDER_CALLS} provider + {TOOL_CALLS} tool calls per chat",
            target=f"<= {ms(TARGET_STEP_CPU_S)} per step",
            met=per_step <= TARGET_STEP_CPU_S and not errors,
        )
        rows += [start_row, total_row, cpu_row]
        if n == 1:
            rows.append(chat_floor.row(db, floor, per_step, TARGET_STEP_CPU_S))
    return rows


def _capacity_rows(db: str, search: CapacitySearch) -> list[Row]:
    confirmed = search.confirmed
    if confirmed:
        figure = f"{confirmed.rate:g} chats/s (confirmed over {confirmed.seconds:g} s)"
    elif search.confirms:
        last = search.confirms[-1]
        figure = f"under {last.rate:g} chats/s (no full-length run passed"
        if len(search.confirms) == 1:  # `SECOND_RUN_WITHIN`
            figure += f"; it missed after {last.ran_s:.0f} s, too late for a second"
        figure += ")"
    else:
        figure = f"under {search.probes[-1].rate:g} chats/s (no probe passed)"
    probes = "; ".join(p.summary() for p in search.probes)
    runs = "; ".join(c.summary() for c in search.confirms) or "none"
    return [
        Row(
            db,
            f"chat capacity (open loop, {search.full_s:g} s at the chosen rate)",
            figure,
            baseline=f"ideal {ms(IDEAL_S)} per chat",
            ratio=(
                f"{search.full_s:g} s: {runs}; probes of {search.probes[0].seconds:g} s from "
                f"{search.predicted:.0f} chats/s (predicted from x300): {probes}"
            ),
            target=f"report: highest rate with p99 <= {CAPACITY_FACTOR}x ideal",
            met=None,
        )
    ]


def run_streams(deployment: Deployment, options: Options) -> list[Row]:
    """Many chats held open at once by a provider answering after HOLD_S: their errors and
    the service's memory per open stream."""
    streams = OPEN_STREAMS[options.quick]
    with _serving(deployment) as (service, url, tokens, work):
        idle = rss_kib(service.pid)
        cpu_before = cpu_seconds(service.pid)
        with (
            RssSampler(service.pid, interval=STREAMS_SAMPLE_S) as sampler,
            Profiler(service.pid, options.profile_dir, f"streams-{streams}"),
        ):
            records = _client(
                url, tokens, streams, work, message=f"{HOLD_MARKER} wait", tools=0, lean=True
            )
        cpu = cpu_seconds(service.pid) - cpu_before
    held = Level(streams, records, sampler.samples, idle, cpu)
    return [_streams_row(deployment.db_kind, held)]


def open_streams(records: list[dict[str, Any]], times: list[float]) -> list[int]:
    """How many streams were open (headers received, not yet ended) at each of `times`."""
    opened = sorted(r["headers"] for r in records if "headers" in r)
    ended = sorted(r.get("end", inf) for r in records if "headers" in r)
    return [bisect_right(opened, t) - bisect_right(ended, t) for t in times]


def _streams_row(db: str, held: Level) -> Row:
    """Memory per stream from the RSS sampled while the most streams were open (all of them
    when the run goes well), never from a peak that may come with few open."""
    errors = held.errors
    counts = open_streams(held.records, [t for t, _ in held.samples])
    most = max(counts, default=0)
    at_most = [kib for (_, kib), n in zip(held.samples, counts, strict=True) if n == most]
    rss = max(at_most, default=0)
    per_stream = (rss - held.idle_kib) / most if most else float("nan")
    return Row(
        db,
        f"chat x{held.chats} open streams ({HOLD_S:g} s answer): service memory",
        f"{per_stream:.1f} KiB per stream ({rss / 1024:.0f} MiB RSS with {most} open); "
        f"{len(errors)} errors",
        baseline=f"idle RSS {held.idle_kib / 1024:.0f} MiB",
        ratio=f"service CPU {held.cpu_s:.0f} s, {ms(held.cpu_s / held.chats)} per stream",
        target=f"0 errors, < {TARGET_STREAM_KIB} KiB/stream",
        met=not errors and most == held.chats and per_stream < TARGET_STREAM_KIB,
        note=_error_kinds(held.records),
    )


def _error_kinds(records: list[dict[str, Any]]) -> str:
    """Each kind of error (its text up to the first colon; an error event's with its message)
    with its count and when the first one ended, in seconds after the first chat started."""
    first = min((r["start"] for r in records if "start" in r), default=0.0)
    kinds: dict[str, list[float]] = {}
    for r in records:
        if r.get("error"):
            text: str = r["error"]
            kind = text[:120] if text.startswith("error event") else text.split(":")[0]
            kinds.setdefault(kind, []).append(r.get("end", inf) - first)
    return "; ".join(
        f"{len(ends)} x {kind}" + (f" (first at +{min(ends):.0f} s)" if min(ends) < inf else "")
        for kind, ends in kinds.items()
    )


# Idle readers (`run_readers`, `--only chat_readers`): this many readers of the events of
# READER_ANSWERS running answers wait beside lone chats. Targets: the lone chats' median within
# 10% of the same chats without them, and the readers' CPU under 5% of a core.
IDLE_READERS = 500
READER_ANSWERS = 5
READERS_CHATS = 12  # lone chats per side, one each 0.8 s
READERS_WINDOW_S = 5.0  # the service's CPU is read over this long, with and without readers
TARGET_READERS_SLOWDOWN = 1.10
TARGET_READERS_CORE = 0.05


def run_readers(deployment: Deployment, options: Options) -> list[Row]:
    """Lone chats alone, then the service's CPU over a window beside READER_ANSWERS held
    answers, then the same with IDLE_READERS readers of their events waiting, then lone chats
    again beside those readers: the chats' median against the first, and the readers' CPU
    (the second window less the first) as a share of a core."""
    with _serving(deployment) as (service, url, tokens, work):
        idle = _client(url, tokens, READERS_CHATS, work, rate=LONE_RATE, name="readers-idle")
        out = work / "readers"
        out.mkdir(exist_ok=True)
        token = json.loads(tokens.read_text())[0]
        argv = [PYTHON, "-m", "bench.readers_client", "--url", url, "--token", token]
        argv += ["--held", str(READER_ANSWERS), "--readers", str(IDLE_READERS), "--dir", str(out)]
        client = subprocess.Popen(argv, cwd=ROOT)
        try:
            _wait_file(out / "held", client)
            time.sleep(1.0)  # the held answers' first writes are done
            without = _cpu_over(service.pid, READERS_WINDOW_S)
            client.send_signal(signal.SIGUSR1)
            with step(f"{IDLE_READERS} readers opened"):
                _wait_file(out / "ready", client)
            state = json.loads((out / "ready").read_text())
            time.sleep(1.0)  # their first reads are done
            with_readers = _cpu_over(service.pid, READERS_WINDOW_S)
            beside = _client(
                url, tokens, READERS_CHATS, work, rate=LONE_RATE, name="readers-beside"
            )
        finally:
            client.terminate()
            client.wait(30)
    return _readers_rows(deployment.db_kind, idle, beside, without, with_readers, state)


def _wait_file(path: Path, client: subprocess.Popen[bytes], within_s: float = 300.0) -> None:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if client.poll() is not None:
            raise RuntimeError(f"readers client exited {client.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {path.name} after {within_s:g}s")
        time.sleep(0.05)


def _cpu_over(pid: int, seconds: float) -> float:
    """The service's CPU time per second (every process, nanosecond reads) over `seconds`."""
    before = precise_cpu_seconds(pid)
    time.sleep(seconds)
    return (precise_cpu_seconds(pid) - before) / seconds


def _readers_rows(
    db: str,
    idle: list[dict[str, Any]],
    beside: list[dict[str, Any]],
    without: float,
    with_readers: float,
    state: dict[str, Any],
) -> list[Row]:
    alone = percentile([r["complete"] - r["start"] for r in idle if "complete" in r], 50)
    near = percentile([r["complete"] - r["start"] for r in beside if "complete" in r], 50)
    errors = [r["error"] for r in idle + beside if r.get("error")]
    slowdown = near / alone
    core = with_readers - without
    readers = f"{state['open']} readers open of {IDLE_READERS} ({state['errors']} failed)"
    return [
        Row(
            db,
            f"chat beside {IDLE_READERS} idle readers (p50 of {READERS_CHATS} lone chats)",
            f"{ms(near)}; {len(errors)} errors",
            baseline=f"{ms(alone)} without them",
            ratio=f"{slowdown:.2f}x",
            target=f"<= {TARGET_READERS_SLOWDOWN:.2f}x",
            met=slowdown <= TARGET_READERS_SLOWDOWN and not errors and state["errors"] == 0,
            note=f"{readers}, opened in {state['ramp_s']} s"
            + (f"; first error: {errors[0]}" if errors else ""),
        ),
        Row(
            db,
            f"CPU of {IDLE_READERS} idle readers of {READER_ANSWERS} running answers",
            f"{core * 100:.1f}% of a core",
            baseline=f"{without * 100:.1f}% of a core beside the held answers alone",
            target=f"< {pct(TARGET_READERS_CORE)}",
            met=core < TARGET_READERS_CORE,
            note=f"the service's CPU over {READERS_WINDOW_S:g} s each, {readers}",
        ),
    ]
