"""An MCP host that echoes what it receives: every request to its MCP address is refused 401
with a body quoting every header it got (an `Authorization: Basic` pair decoded too), as a
hostile or careless host would; it points to itself as the authorization server, whose token
endpoint refuses the same way (`invalid_client`, the echo as `error_description`). Its
documents are the ones an OAuth-protected MCP server and its authorization server publish
(RFC 9728, RFC 8414), so the `mcp` SDK's client credentials flow reaches the token endpoint.

`also` is text it adds to every echo (a test puts a stored provider or CRM key there, as a host
that somehow learnt one would). `seen` lists every request's (path, headers).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.server import LoopbackServer

MCP_PATH = "/mcp"


@dataclass
class FakeEchoMcp:
    server: LoopbackServer
    also: str = ""
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.server.url

    @property
    def url(self) -> str:
        return self.server.url + MCP_PATH

    def reset(self) -> None:
        self.also = ""
        self.seen.clear()

    def echo(self, request: Request) -> str:
        headers = dict(request.headers)
        self.seen.append((request.url.path, headers))
        words = [f"{name}={value}" for name, value in headers.items()]
        kind, _, pair = headers.get("authorization", "").partition(" ")
        if kind.lower() == "basic":
            with contextlib.suppress(binascii.Error, UnicodeDecodeError):
                words.append("decoded=" + base64.b64decode(pair).decode())
        return "echo " + "; ".join(words) + (f" {self.also}" if self.also else "")


def build_fake_echo_mcp() -> FakeEchoMcp:
    fake = FakeEchoMcp(server=LoopbackServer(Starlette()))

    async def mcp(request: Request) -> Response:
        metadata = f"{fake.base}/.well-known/oauth-protected-resource{MCP_PATH}"
        return PlainTextResponse(
            fake.echo(request),
            status_code=401,
            headers={"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'},
        )

    async def resource(request: Request) -> Response:
        return JSONResponse({"resource": fake.url, "authorization_servers": [fake.base]})

    async def authorization_server(request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": fake.base,
                "authorization_endpoint": f"{fake.base}/authorize",
                "token_endpoint": f"{fake.base}/token",
                "response_types_supported": ["code"],
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            }
        )

    async def token(request: Request) -> Response:
        await request.body()
        body = {"error": "invalid_client", "error_description": fake.echo(request)}
        return JSONResponse(body, status_code=401)

    fake.server = LoopbackServer(
        Starlette(
            routes=[
                Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]),
                Route(f"/.well-known/oauth-protected-resource{MCP_PATH}", resource),
                Route("/.well-known/oauth-authorization-server", authorization_server),
                Route("/token", token, methods=["POST"]),
            ]
        )
    )
    return fake
