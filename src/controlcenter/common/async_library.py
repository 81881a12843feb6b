"""The server's event-loop thread tells sniffio that it runs asyncio, once, instead of sniffio
finding out on every call.

anyio, under httpx, the provider SDKs and the MCP client, asks sniffio which async library is
running on most of the calls it serves (a lock, a cancel scope, a timeout, a socket's send),
and httpcore asks too. Left to find out, sniffio reads its thread-local, then its context
variable, then looks asyncio's current task up, several times the cost of reading the
thread-local once it says it, on a path that runs for every lock, timeout and send of a busy
server. `sniffio.thread_local.name`
is sniffio's documented way for whoever runs a loop in a thread to say which library it is;
the server's thread runs asyncio's loop and nothing else while the app is up, and other threads
(anyio's worker threads) still sniff.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sniffio

ASYNCIO = "asyncio"


@contextmanager
def declared_asyncio() -> Iterator[None]:
    """Around the app's life in its loop (the lifespan): the thread's previous value comes
    back after, so a thread that later runs another loop (the tests') sniffs again."""
    previous = sniffio.thread_local.name
    sniffio.thread_local.name = ASYNCIO
    try:
        yield
    finally:
        sniffio.thread_local.name = previous
