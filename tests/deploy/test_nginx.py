"""deploy/nginx/nginx.conf, as shipped but for the lines it marks to change (ports other than
443 and 80, the instances, a self-signed certificate), in Debian's nginx in front of two
instances of the service on one database: plain HTTP redirects to the HTTPS port, the chat's
stream is not buffered, the sign-in throttle counts the client's address, not the proxy's, and
a cut chat resumes through the proxy.

The instances are apps served in this process with the uvicorn options `serve` uses
(`cli.proxies`), which saves two cold starts of the suite's budget.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from httpx_sse import aconnect_sse

from controlcenter.app import create_app
from controlcenter.cli.proxies import proxy_options
from tests.chat.helpers import set_settings
from tests.conftest import RunningServer, UserFactory
from tests.fakes.llm import FakeAnthropic, Reply
from tests.fakes.server import LoopbackServer, listening_socket
from tests.security.test_throttle import TOO_MANY

NGINX = "/usr/sbin/nginx"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "nginx"
HOLD_S = 2.0
PER_ADDRESS = 3


@dataclass(frozen=True)
class Proxy:
    """deploy/nginx/nginx.conf running: its HTTPS address, its HTTP (redirecting) address, and
    the TLS context that trusts its self-signed certificate."""

    url: str
    http_url: str
    trust: ssl.SSLContext
    certificate: Path


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def configured(https_port: int, http_port: int, upstreams: list[str], cert: Path, key: Path) -> str:
    """deploy/nginx/nginx.conf with only its lines marked `# CHANGE` changed (and each of them
    changed): the ports (on the loopback), the instances, the certificate."""
    lines: list[str] = []
    changed = 0
    for line in (DEPLOY / "nginx.conf").read_text().splitlines():
        if "# CHANGE" not in line or line.lstrip().startswith("#"):
            lines.append(line)
            continue
        changed += 1
        indent = line[: len(line) - len(line.lstrip())]
        directive = line.split("#", 1)[0].strip()
        if directive.startswith("server "):
            if not any(f"server {upstreams[0]};" in done for done in lines):
                lines += [f"{indent}server {u};" for u in upstreams]
        elif directive == "listen 80;":
            lines.append(f"{indent}listen 127.0.0.1:{http_port};")
        elif directive.startswith("listen 443 "):
            lines.append(f"{indent}listen 127.0.0.1:{https_port} ssl http2;")
        elif directive.startswith("set $https_port "):
            lines.append(f'{indent}set $https_port ":{https_port}";')
        elif directive.startswith("ssl_certificate "):
            lines.append(f"{indent}ssl_certificate {cert};")
        elif directive.startswith("ssl_certificate_key "):
            lines.append(f"{indent}ssl_certificate_key {key};")
        else:
            raise AssertionError(f"a line to change that the test does not know: {line}")
    assert changed == 7, changed
    return "\n".join(lines) + "\n"


def free_port() -> int:
    sock = listening_socket("127.0.0.1", 0)
    port: int = sock.getsockname()[1]
    sock.close()
    return port


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
def proxy(instances: list[str], tmp_path: Path) -> Iterator[Proxy]:
    """The shipped configuration, its marked lines changed, in Debian's nginx on ports other
    than 443 and 80 (`nginx -c`, the snippet found beside it as shipped)."""
    assert shutil.which(NGINX), "nginx is missing: run ./scripts/ensure-nginx.sh (make test does)"
    https_port, http_port = free_port(), free_port()
    cert, key = self_signed(tmp_path)
    folder = tmp_path / "nginx"
    folder.mkdir()
    shutil.copy(DEPLOY / "controlcenter-proxy.conf", folder)
    (folder / "nginx.conf").write_text(configured(https_port, http_port, instances, cert, key))
    process = subprocess.Popen(
        [
            NGINX,
            "-c",
            str(folder / "nginx.conf"),
            "-e",
            "stderr",
            "-g",
            f"daemon off; pid {tmp_path / 'nginx.pid'};",
        ],
        stderr=subprocess.PIPE,
    )
    trust = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{https_port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(url + "/healthz", verify=trust).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield Proxy(url, f"http://127.0.0.1:{http_port}", trust, cert)
    finally:
        process.terminate()
        process.wait(10)


def test_plain_http_is_redirected_to_the_https_port(proxy: Proxy) -> None:
    answer = httpx.get(proxy.http_url + "/chat?x=1")
    assert answer.status_code == 301
    assert answer.headers["location"] == proxy.url + "/chat?x=1"
    assert httpx.get(proxy.url + "/metrics", verify=proxy.trust).status_code == 404


async def test_the_chat_streams_through_the_proxy_unbuffered(
    proxy: Proxy, server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
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
        httpx.AsyncClient(base_url=proxy.url, timeout=30, verify=proxy.trust) as http,
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


async def test_the_throttle_counts_the_clients_address(proxy: Proxy, instances: list[str]) -> None:
    async def login(source: str, n: int, **headers: str) -> int:
        transport = httpx.AsyncHTTPTransport(local_address=source, verify=proxy.trust)
        async with httpx.AsyncClient(base_url=proxy.url, transport=transport) as http:
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
    proxy: Proxy, server: RunningServer, users: UserFactory, fake_anthropic: FakeAnthropic
) -> None:
    """Cut after message_start, then resumed with Last-Event-ID through the proxy (either
    instance may serve the resume: they share only the database): every event once, in order."""
    user = await users.create()
    await set_settings(server, {"providerAApiKey": fake_anthropic.api_key}, user)
    fake_anthropic.script(Reply(text="Held answer.", delay_s=HOLD_S / 2))
    async with httpx.AsyncClient(base_url=proxy.url, timeout=30, verify=proxy.trust) as http:
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
