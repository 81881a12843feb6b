"""deploy/nginx/controlcenter-proxy.conf in Debian's nginx (unprivileged, a temporary prefix,
a free port) in front of two instances of the service on one database: the chat's stream is
not buffered, the sign-in throttle counts the client's address, not the proxy's, and a cut
chat resumes through the proxy.

The instances are apps served in this process with the uvicorn options `serve` uses
(`cli.proxies`), which saves two cold starts of the suite's budget.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import aconnect_sse

from controlcenter.app import create_app
from controlcenter.cli.proxies import proxy_options
from tests.chat.helpers import set_settings
from tests.conftest import RunningServer, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply
from tests.fakes.server import LoopbackServer, listening_socket
from tests.security.test_throttle import TOO_MANY

NGINX = "/usr/sbin/nginx"
SNIPPET = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "controlcenter-proxy.conf"
HOLD_S = 2.0
PER_ADDRESS = 3


def nginx_conf(prefix: Path, port: int, upstreams: list[str]) -> str:
    servers = "".join(f"server {u};\n" for u in upstreams)
    temp = "".join(
        f"{kind}_temp_path {prefix / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""
worker_processes 1;
pid {prefix / "nginx.pid"};
events {{ worker_connections 256; }}
http {{
    access_log off;
    {temp}
    upstream controlcenter {{ {servers} keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{ include {SNIPPET}; }}
    }}
}}
"""


@pytest.fixture
def instances(server: RunningServer) -> Iterator[list[str]]:
    config = server.config.model_copy(update={"signin_max_failures_per_address": PER_ADDRESS})
    started = [
        LoopbackServer(create_app(config), uvicorn_options=proxy_options()).start()
        for _ in range(2)
    ]
    yield [s.url.removeprefix("http://") for s in started]
    for instance in started:
        instance.stop()


@pytest.fixture
def proxy(instances: list[str], tmp_path: Path) -> Iterator[str]:
    assert shutil.which(NGINX), "nginx is missing: run ./scripts/ensure-nginx.sh (make test does)"
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    (tmp_path / "nginx.conf").write_text(nginx_conf(tmp_path, port, instances))
    process = subprocess.Popen(
        [
            NGINX,
            "-p",
            str(tmp_path),
            "-c",
            str(tmp_path / "nginx.conf"),
            "-e",
            "stderr",
            "-g",
            "daemon off;",
        ],
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(10)


async def test_the_chat_streams_through_the_proxy_unbuffered(
    proxy: str, server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
) -> None:
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    # The provider answers only once the client has read message_start through the proxy: a
    # proxy that buffered the stream would hold message_start back until the answer, and the
    # provider's wait runs out (its 500 ends the chat with an error event instead).
    started = threading.Event()

    async def until_message_start_arrived(seconds: float) -> None:
        assert await asyncio.to_thread(started.wait, 30)

    fake_anthropic.sleep = until_message_start_arrived
    fake_anthropic.script(Reply(text="Held.", delay_s=HOLD_S))
    kinds: list[str] = []
    async with (
        httpx.AsyncClient(base_url=proxy, timeout=30) as http,
        http.stream(
            "POST", "/api/v1/control-center/chat", json={"message": "Hi"}, headers=user.headers
        ) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                kinds.append(json.loads(line[6:])["type"])
                if kinds[-1] == "message_start":
                    started.set()
    assert kinds == ["message_start", "content_delta", "message_complete"]


async def test_the_throttle_counts_the_clients_address(proxy: str, instances: list[str]) -> None:
    async def login(source: str, n: int, **headers: str) -> int:
        transport = httpx.AsyncHTTPTransport(local_address=source)
        async with httpx.AsyncClient(base_url=proxy, transport=transport) as http:
            body = {"email": f"nobody{n}@example.com", "password": "wrong"}
            answer = await http.post("/api/v1/auth/login", json=body, headers=headers)
            if answer.status_code == 429:
                assert answer.json() == TOO_MANY
            return answer.status_code

    # The proxy's own address is 127.0.0.1 for every request; clients come from others.
    # What a client claims in X-Forwarded-For is replaced by the proxy (the edge).
    attempts = [await login("127.0.0.2", n, **{"X-Forwarded-For": f"10.0.0.{n}"}) for n in range(4)]
    assert attempts == [401] * PER_ADDRESS + [429]
    assert await login("127.0.0.3", 9) == 401  # another client is not locked out


async def test_a_chat_resumes_through_the_proxy(
    proxy: str, server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
) -> None:
    """Cut after message_start, then resumed with Last-Event-ID through the proxy (either
    instance may serve the resume: they share only the database): every event once, in order."""
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    fake_anthropic.script(Reply(text="Held answer.", delay_s=HOLD_S / 2))
    async with httpx.AsyncClient(base_url=proxy, timeout=30) as http:
        body = {"message": "Hi"}
        first: list[tuple[str, dict[str, object]]] = []
        async with aconnect_sse(
            http, "POST", "/api/v1/control-center/chat?ids=1", json=body, headers=user.headers
        ) as source:
            async for sse in source.aiter_sse():
                first.append((sse.id, json.loads(sse.data)))
                break  # the phone loses its connection after message_start
        [(last_id, start)] = first
        message_id = str(start["messageId"])
        assert last_id == f"{message_id}:1"
        resumed: list[tuple[str, dict[str, object]]] = []
        async with aconnect_sse(
            http,
            "GET",
            f"/api/v1/control-center/chat/{message_id}/events",
            headers={**user.headers, "Last-Event-ID": last_id},
        ) as source:
            assert source.response.status_code == 200
            async for sse in source.aiter_sse():
                resumed.append((sse.id, json.loads(sse.data)))
    assert [frame_id for frame_id, _ in resumed] == [f"{message_id}:2", f"{message_id}:3"]
    assert [event["type"] for _, event in resumed] == ["content_delta", "message_complete"]
    assert resumed[0][1]["delta"] == "Held answer."
