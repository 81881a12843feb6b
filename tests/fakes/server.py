"""Run any ASGI app under uvicorn on 127.0.0.1, in a background thread with its own event loop.

Why a thread: the fake keeps serving while the test's own event loop is blocked or busy (sync
tests, the service under test running in the session loop, a benchmark driving 1,000 clients),
and a fake can never deadlock against the code it serves.

    with LoopbackServer(app) as server:
        httpx.get(server.url + "/health")

or `server.start()` ... `server.stop()`. `start()` returns once uvicorn accepts connections.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import uvicorn
from starlette.types import ASGIApp

__all__ = ["LoopbackServer"]


def listening_socket(host: str, port: int, backlog: int = 4096) -> socket.socket:
    """A bound, listening TCP socket to hand to uvicorn (`sockets=[...]`).

    Created with `IPPROTO_TCP`, not the default protocol 0: asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only on sockets whose `proto` says TCP, and accepted sockets inherit it. With
    Nagle on, every response after a connection's first waited ~40 ms for the client's delayed
    ACK (uvicorn writes head and body separately), which made each call to a fake 40 ms slower.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


class LoopbackServer:
    """One uvicorn server on an OS-chosen free port, served from a daemon thread.

    Tuned for load: no concurrency limit, a listen backlog of 4096, no access log, logging at
    warning level and uvicorn's logging config left alone (the process's logging is not
    reconfigured). `uvicorn_options` overrides any `uvicorn.Config` argument.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        backlog: int = 4096,
        loop: str = "asyncio",
        log_level: str = "warning",
        startup_timeout: float = 10.0,
        uvicorn_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._app = app
        self._host = host
        self._requested_port = port
        self._backlog = backlog
        self._startup_timeout = startup_timeout
        self._options: dict[str, Any] = {
            "loop": loop,
            "http": "auto",
            "lifespan": "auto",
            "log_level": log_level,
            "log_config": None,
            "access_log": False,
            "limit_concurrency": None,
            "backlog": backlog,
            # Longer than any client pool keeps an idle connection, so the server never closes
            # a connection at the moment a client reuses it.
            "timeout_keep_alive": 75,
            "timeout_graceful_shutdown": 2,
            **(uvicorn_options or {}),
        }
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._port: int | None = None
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind, start serving, and return once connections are accepted."""
        if self._thread is not None:
            raise RuntimeError("LoopbackServer already started")
        sock = listening_socket(self._host, self._requested_port, self._backlog)
        self._socket = sock
        self._port = sock.getsockname()[1]

        config = uvicorn.Config(self._app, host=self._host, port=self._port, **self._options)
        server = uvicorn.Server(config)
        self._server = server
        loop_factory = config.get_loop_factory()

        def run() -> None:
            try:
                with asyncio.Runner(loop_factory=loop_factory) as runner:
                    runner.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported by start(); SystemExit on startup failure
                self._error = exc

        thread = threading.Thread(target=run, name=f"loopback-{self._port}", daemon=True)
        self._thread = thread
        thread.start()

        deadline = time.monotonic() + self._startup_timeout
        while not server.started:
            if not thread.is_alive():
                self._thread = None
                sock.close()
                raise RuntimeError(f"LoopbackServer failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"LoopbackServer not started after {self._startup_timeout}s")
            time.sleep(0.002)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish (2 s grace), and join the thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        if self._socket is not None:
            self._socket.close()
        self._thread = None
        self._server = None
        self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("LoopbackServer not started")
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`, without a trailing slash."""
        return f"http://{self._host}:{self.port}"
