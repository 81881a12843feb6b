"""The outside systems of a run, each in its own process so that none competes with the
service's event loop (nor with each other's): the project's own loopback fakes from tests/fakes,
started and scripted for benchmarking.

    python -m bench.fakes llm --info FILE --delay 0.2
    python -m bench.fakes mcp --info FILE
    python -m bench.fakes crm --info FILE --delay 5

Each writes a JSON description (its URL, its credentials) to FILE once it serves, then runs
until it is terminated; the CRM then writes what it refused to FILE.stats (`FakeProc.stats`).
The provider keeps the last `KEPT_REQUESTS` requests it received (headers and bytes) and writes
them to FILE.requests on SIGUSR1 (`FakeProc.last_requests`): what a lone chat sent, for the
chat step's floor to send again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.procs import PYTHON, Proc
from bench.timeline import step

if TYPE_CHECKING:
    from tests.fakes.llm import Received

LLM_API_KEY = "sk-ant-api03-bench-" + "k" * 40
BENCH_TOOL = "echo_text"  # a cheap tool of the fake MCP server
TOOL_ROUNDS = 2  # replies 1 and 2 ask for the tool, reply 3 is text
# The provider's requests kept for SIGUSR1: as many as a chat's provider calls.
KEPT_REQUESTS = TOOL_ROUNDS + 1
# A chat whose message holds this is answered with text only, after HOLD_S: streams kept open.
HOLD_MARKER = "[hold]"
HOLD_S = 30.0
# The same, held longer: the answers whose idle readers a whole section watches.
LONG_HOLD_MARKER = "[hold long]"
LONG_HOLD_S = 300.0


def _tool_results(body: dict[str, Any]) -> int:
    """How many tool results the request carries (Anthropic's `tool_result` blocks)."""
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b["type"] == "tool_result")
    return count


_RECENT: list[_Recent] = []  # the provider's kept requests in this process, for SIGUSR1


def serve_llm(delay_s: float) -> dict[str, Any]:
    from tests.fakes.llm import FakeAnthropic, Reply, ToolUse

    fake = FakeAnthropic(LLM_API_KEY)

    def responder(body: dict[str, Any]) -> Reply:
        last = json.dumps(body["messages"][-1])
        if LONG_HOLD_MARKER in last:
            return Reply(text="Held.", delay_s=LONG_HOLD_S)
        if HOLD_MARKER in last:
            return Reply(text="Held.", delay_s=HOLD_S)
        done = _tool_results(body)
        if done < TOOL_ROUNDS:
            tool = ToolUse(BENCH_TOOL, {"text": f"round {done + 1}"})
            return Reply(text=f"Looking that up ({done + 1}).", tool_uses=[tool], delay_s=delay_s)
        return Reply(text="Here is what I found.", delay_s=delay_s)

    fake.responder = responder
    # The fake keeps every request for tests to inspect (parsed, and as received: ~25 KB
    # each, 250 MB for the held streams); a benchmark keeps the last few as received.
    fake.requests = _Discard()
    fake.received = _Recent(KEPT_REQUESTS)
    _RECENT.append(fake.received)
    fake.start()
    return {"url": fake.url, "api_key": LLM_API_KEY}


class _Discard(list[Any]):
    """Calls counted, not kept (a long run would hold every one)."""

    seen = 0

    def append(self, item: Any) -> None:
        self.seen += 1


class _Recent(_Discard):
    """Calls counted, the last `size` kept (the fake's `Received`: headers and bytes)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.last: list[Any] = []

    def append(self, item: Any) -> None:
        super().append(item)
        # One list replaced, never changed in place: the signal handler reads it from the main
        # thread while the server's thread appends.
        self.last = [*self.last, item][-self.size :]


def _write_recent(info: str) -> None:
    """The provider's kept requests to INFO.requests (written whole, then renamed)."""
    kept = _RECENT[0].last if _RECENT else []
    requests = [{"headers": r.headers, "body": r.body.decode()} for r in kept]
    path = Path(info + ".requests")
    Path(f"{path}.tmp").write_text(json.dumps(requests))
    os.replace(f"{path}.tmp", path)


def serve_mcp() -> dict[str, Any]:
    from tests.fakes.mcp_server import build_fake_mcp

    fake = build_fake_mcp()
    fake.calls = _Discard()
    fake.server.start()
    return {"url": fake.url}


_CRM: list[Any] = []  # the fake CRM of this process, for its stats at the end


class _Arrivals(_Discard):
    """The CRM's calls counted, and each one's arrival time kept (`Call.at`, the monotonic
    clock every process of the machine shares): when the outbox's requests came, not what
    they held."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: Any) -> None:
        super().append(item)
        self.times.append(item.at)


def serve_crm(delay_s: float) -> dict[str, Any]:
    from tests.fakes.crm import FakeCrm, define_onboarding_fields

    fake = FakeCrm()
    location = fake.add_location(name="Operator")["id"]
    define_onboarding_fields(fake, location)
    token = fake.private_token(location)
    fake.delay_s = delay_s
    fake.calls = _Arrivals()
    fake.start()
    _CRM.append(fake)
    return {"url": fake.url, "location_id": location, "private_token": token}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fakes")
    parser.add_argument("kind", choices=["llm", "mcp", "crm"])
    parser.add_argument("--info", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    if args.kind == "llm":
        info = serve_llm(args.delay)
    elif args.kind == "mcp":
        info = serve_mcp()
    else:
        info = serve_crm(args.delay)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: _write_recent(args.info))
    Path(args.info + ".tmp").write_text(json.dumps(info))
    Path(args.info + ".tmp").rename(args.info)
    stop.wait()
    if _CRM:
        crm = _CRM[0]
        # Every request answered (a 429 included): per delivered job, what the outbox spent.
        requests = crm.calls.seen if isinstance(crm.calls, _Discard) else len(crm.calls)
        arrivals = crm.calls.times if isinstance(crm.calls, _Arrivals) else []
        stats = {
            "burst_refusals": crm.burst_refusals,
            "requests": requests,
            "arrivals": arrivals,
        }
        Path(args.info + ".stats").write_text(json.dumps(stats))


class FakeProc(Proc):
    """A fake in its own process; `info` is what it wrote once serving. Named `fake-<kind>`
    unless `name` says otherwise (the lone chats count the CPU of every `fake-` process)."""

    def __init__(
        self, kind: str, info_dir: Path, delay_s: float = 0.0, *, name: str | None = None
    ) -> None:
        name = name or f"fake-{kind}"
        self.info_file = info_dir / f"{name}.json"
        argv = [PYTHON, "-m", "bench.fakes", kind, "--info", str(self.info_file)]
        super().__init__(name, [*argv, "--delay", str(delay_s)])
        self.info: dict[str, Any] = {}

    def start(self) -> FakeProc:
        return self.launch().ready()

    def launch(self) -> FakeProc:
        super().start()
        return self

    def ready(self) -> FakeProc:
        """Wait until it serves; `info` is then what it wrote."""
        deadline = time.monotonic() + 30
        while not self.info_file.exists():
            assert self.popen is not None
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.output()}")
            time.sleep(0.05)
        self.info = json.loads(self.info_file.read_text())
        return self

    def last_requests(self, within_s: float = 10.0) -> list[Received]:
        """The provider's last requests (oldest first), as it received them."""
        from tests.fakes.llm import Received  # the fakes' imports only where they are used

        path = Path(f"{self.info_file}.requests")
        path.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + within_s
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} wrote no {path.name} in {within_s:g}s")
            time.sleep(0.02)
        kept = json.loads(path.read_text())
        return [Received(r["headers"], r["body"].encode()) for r in kept]

    def stats(self) -> dict[str, Any]:
        """What the fake counted, once it has stopped (the CRM's refusals)."""
        path = Path(f"{self.info_file}.stats")
        return json.loads(path.read_text()) if path.exists() else {}


@contextmanager
def running(*fakes: FakeProc) -> Iterator[None]:
    """The fakes started together (their imports overlap), each serving before the block, all
    stopped after it."""
    with ExitStack() as stack:
        with step(" and ".join(f.name for f in fakes) + " started"):
            for fake in fakes:
                stack.callback(fake.stop)
                fake.launch()
            for fake in fakes:
                fake.ready()
        yield


if __name__ == "__main__":
    main()
