"""Subprocesses of a benchmark run: the service, the bare baseline, the fakes, the clients.

Every process is started with its own output files, waited for with a bounded deadline, and
stopped by its own pid (terminate, then kill), whatever happens to the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

PYTHON = sys.executable
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


# Every started Proc by pid, with its name, until it is stopped: each step of the timeline
# prints what these used of the CPU (timeline.step).
RUNNING: dict[int, str] = {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Proc:
    """One subprocess whose stdout/stderr go to files (read back on failure)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        grace_s: float = 10.0,
    ):
        self.name = name
        self.grace_s = grace_s  # from SIGTERM to SIGKILL in stop()
        self.argv = list(argv)
        self.env = {**os.environ, **(env or {})}
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix=f"bench-{name}-", suffix=".log", delete=False
        )
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self) -> Self:
        self.popen = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # A group of its own: `serve` is a supervisor over its workers, and killing only
            # the supervisor would leave them running (holding the database the next section
            # resets).
            start_new_session=True,
        )
        RUNNING[self.popen.pid] = self.name
        return self

    def output(self, tail: int = 4000) -> str:
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace")
        return text[-tail:]

    def wait_http(self, url: str, timeout: float = 180.0) -> None:
        """Return once `url` answers (any status); fail with the process's output otherwise.

        The deadline is generous because a loaded machine stretches `serve`'s start (about 8 s
        of CPU for the supervisor and two workers) well past a minute; it costs nothing when
        the service answers sooner."""
        deadline = time.monotonic() + timeout
        # One client for every attempt: `httpx.get` builds a client, and its TLS context, each
        # time, ~25 ms of CPU an attempt: 2.4-2.8 s of the bench's CPU per start-up, on the
        # cores the service is starting on.
        with httpx.Client(timeout=1.0) as http:
            while time.monotonic() < deadline:
                assert self.popen is not None
                if self.popen.poll() is not None:
                    raise RuntimeError(f"{self.name} exited early:\n{self.output()}")
                try:
                    http.get(url)
                    return
                except httpx.TransportError:
                    time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not answer {url} in {timeout}s:\n{self.output()}")

    def wait_settled(
        self, timeout: float = 120.0, busy: float = 0.05, window_s: float = 0.5
    ) -> None:
        """Return once the process tree is idle (under `busy` of a core over `window_s`).

        The first answer comes from whichever worker started first; the others may still be
        importing for seconds, and that CPU would count as the first level's. Half a second
        tells a worker that works (an import or a load is most of a core) from an idle one (the
        outbox's polls, a few ms); a whole second cost each of the run's ~12 waits 0.5 s more.
        """
        deadline = time.monotonic() + timeout
        used = cpu_seconds(self.pid)
        while time.monotonic() < deadline:
            time.sleep(window_s)
            now = cpu_seconds(self.pid)
            if now - used < busy * window_s:
                return
            used = now
        raise TimeoutError(f"{self.name} still busy after {timeout}s:\n{self.output()}")

    def stop(self) -> None:
        """SIGTERM, then after `grace_s` SIGKILL to the whole group (a worker still draining
        its open streams included)."""
        if self.popen is not None:
            RUNNING.pop(self.popen.pid, None)
            if self.popen.poll() is None:
                self.popen.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(self.grace_s)
            _kill_group(self.popen)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` and its descendants now, in KiB (Linux /proc): `serve` with
    several workers is a supervisor and one process per worker."""
    return sum(_own_rss_kib(each) for each in process_tree(pid))


def _kill_group(leader: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of the leader's group and wait until it is gone."""
    try:
        os.killpg(leader.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        leader.poll()  # reaps the leader: a zombie still counts as a member
        try:
            os.killpg(leader.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"process group {leader.pid} still alive after SIGKILL")


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc's children lists."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo.extend(int(child) for child in task.read_text().split())
    return tree


def _own_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class RssSampler:
    """Samples a process's RSS every `interval` seconds in a thread: (monotonic time, KiB)."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), rss_kib(self.pid)))
            except (OSError, RuntimeError):
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def peak(self) -> int:
        return max((kib for _, kib in self.samples), default=0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time used so far by `pid` and the processes below it (serve's
    workers), all threads."""
    return sum(cpu_seconds_by_process(pid).values())


def cpu_seconds_by_process(pid: int) -> dict[int, float]:
    """`cpu_seconds` of each process of the tree, by pid."""
    seconds: dict[int, float] = {}
    for each in process_tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        seconds[each] = ticks / os.sysconf("SC_CLK_TCK")
    return seconds


async def per_call(call: Callable[[], Awaitable[None]], calls: int) -> tuple[float, float]:
    """This process's CPU time and the wall time per call, of `calls` calls made in turn (s)."""
    cpu, started = time.process_time(), time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.process_time() - cpu) / calls, (time.perf_counter() - started) / calls


def precise_cpu_seconds(pid: int) -> float:
    """`cpu_seconds` in nanoseconds rather than 10 ms ticks: the run time of every thread of
    `pid` and the processes below it (/proc's schedstat). A thread that has ended takes its
    time with it, so this is for windows over which the threads stay, as serve's (three
    processes, 11 threads) do over its lone chats and its idle seconds."""
    nanoseconds = 0
    for each in process_tree(pid):
        for task in Path(f"/proc/{each}/task").glob("*/schedstat"):
            try:
                nanoseconds += int(task.read_text().split()[0])
            except OSError:
                continue  # ended while we looked
    return nanoseconds / 1e9


class Profiler:
    """py-spy sampling `pid` while the block runs: collapsed stacks (`<name>.txt`, the input of
    any flame graph tool) and a summary of the hottest functions (`<name>.top.txt`).

    Does nothing when `out_dir` is None, so a section can always wrap its measurement in it.
    """

    def __init__(self, pid: int, out_dir: Path | None, name: str) -> None:
        self.pid = pid
        self.out_dir = out_dir
        self.name = name
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            argv = [str(BIN / "py-spy"), "record", "-p", str(self.pid), "-r", "200", "-f", "raw"]
            argv += ["--subprocesses"]  # the workers of a multi-process `serve`
            argv += ["--gil"]  # CPU only: a thread that waits holds no GIL
            argv += ["-o", str(self.out_dir / f"{self.name}.txt")]
            self._proc = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None or self.out_dir is None:
            return
        self._proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return
        raw = self.out_dir / f"{self.name}.txt"
        if raw.exists():
            (self.out_dir / f"{self.name}.top.txt").write_text(summarise(raw.read_text()))


def summarise(collapsed: str, top: int = 40) -> str:
    """Self and inclusive sample counts per function, from collapsed stacks."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
    lines = [f"{total} samples", "", "self:"]
    lines += [f"{n:7d} {f}" for f, n in sorted(own.items(), key=lambda x: -x[1])[:top]]
    lines += ["", "inclusive:"]
    lines += [f"{n:7d} {f}" for f, n in sorted(inclusive.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(lines) + "\n"
