"""Where a section's wall time goes: each step's seconds, printed as it ends, with the CPU
time each process used meanwhile.

    with step("sqlite chat: service answered"):
        service.wait_http(url)

prints `bench:   sqlite chat: service answered: 5.1s (CPU s: service 9.8, bench 0.1)`. The
run's log then reads as a timeline (start-ups, seeding, warm-ups, settling, loads), which is
what deciding what to cut needs; the CPU says whether a step waited or worked, and for whom
(on 2 cores a step whose CPU is about twice its wall time is bound by the cores, whatever the
other engineers' load did to its wall time). "bench" is this process and the processes it
has waited for (the chat clients, wrk; a `Proc` stopped within the step would count there
too, so no step encloses a stop); the others are the running `Proc`s with their children
(serve's workers).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.procs import RUNNING, cpu_seconds


def _bench_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


def _cpu(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:  # ended while we looked
        return 0.0


@contextmanager
def step(what: str) -> Iterator[None]:
    started, bench = time.monotonic(), _bench_cpu()
    before = {pid: _cpu(pid) for pid in RUNNING}
    try:
        yield
    finally:
        wall = time.monotonic() - started
        # A process started during the step counts from zero; one stopped during it is left out.
        used = {name: _cpu(pid) - before.get(pid, 0.0) for pid, name in list(RUNNING.items())}
        used["bench"] = _bench_cpu() - bench
        cpu = ", ".join(f"{name} {s:.1f}" for name, s in used.items() if s >= 0.05)
        print(f"bench:   {what}: {wall:.1f}s (CPU s: {cpu or 'none'})", flush=True)
