"""`python -m bench.slow_client`: hold slow connections to the service, as a slow client attack
would: a third send nothing, a third trickle a request head (a header line every `--trickle`
seconds), a third trickle a body (a byte every `--trickle` seconds). Writes `held` in `--dir`
once all are open, then `closed` (JSON: how many the service closed, and after how long) once
the service has closed every one, or `--give-up` seconds have passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from pathlib import Path
from urllib.parse import urlsplit

KINDS = {
    "silent": (b"", b""),
    "head": (b"GET /healthz HTTP/1.1\r\nHost: bench\r\n", b"X-Slow: 1\r\n"),
    "body": (
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{",
        b" ",
    ),
}


class Opened:
    """Counts the connections opened (or refused); `all` is set once every one has been."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = 0
        self.all = asyncio.Event()

    def one(self) -> None:
        self.done += 1
        if self.done >= self.count:
            self.all.set()


async def hold(host: str, port: int, kind: str, trickle_s: float, opened: Opened) -> float:
    """Seconds from the connection's opening to the service closing it."""
    first, trickle = KINDS[kind]
    try:
        reader, writer = await asyncio.open_connection(host, port)
    finally:
        opened.one()
    started = time.monotonic()

    async def send() -> None:
        try:
            writer.write(first)
            while trickle:
                await writer.drain()
                await asyncio.sleep(trickle_s)
                writer.write(trickle)
        except (ConnectionError, RuntimeError):
            pass

    sender = asyncio.create_task(send())
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    finally:
        sender.cancel()
        writer.close()
    return time.monotonic() - started


async def main(args: argparse.Namespace) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.count + 1024)), hard))
    url = urlsplit(args.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    out = Path(args.dir)
    opened = Opened(args.count)
    tasks: dict[str, list[asyncio.Task[float]]] = {kind: [] for kind in KINDS}
    for n in range(args.count):
        kind = list(KINDS)[n % len(KINDS)]
        tasks[kind].append(asyncio.create_task(hold(host, port, kind, args.trickle, opened)))
        if n % 200 == 199:
            await asyncio.sleep(0.05)  # a ramp, not a burst the listen backlog drops
    await opened.all.wait()
    (out / "held").write_text(str(opened.done))
    everything = [t for each in tasks.values() for t in each]
    await asyncio.wait(everything, timeout=args.give_up)
    result = {
        kind: {
            "closed": sum(1 for t in each if t.done() and not t.exception()),
            "held": len(each),
            "max_s": max((t.result() for t in each if t.done() and not t.exception()), default=0),
        }
        for kind, each in tasks.items()
    }
    (out / "closed").write_text(json.dumps(result))
    for task in everything:
        task.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.slow_client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--trickle", type=float, default=5.0)
    parser.add_argument("--give-up", type=float, default=120.0)
    parser.add_argument("--dir", required=True)
    asyncio.run(main(parser.parse_args()))
