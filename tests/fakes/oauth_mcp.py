"""A loopback MCP server that requires OAuth, with its authorization server, built from the
`mcp` package's own server pieces and served on one port.

The MCP server is the SDK's MCPServer with its auth settings: a token verifier, the
`RequireAuthMiddleware` around the endpoint (401 with `WWW-Authenticate` naming the protected
resource metadata) and that metadata (RFC 9728) naming the authorization server. The
authorization server's metadata (RFC 8414, at the issuer's path-aware well-known address) is
the SDK's `build_metadata`, served by its `MetadataHandler`.

The token endpoint is this fake's own: the SDK's token handler serves the authorization-code,
refresh and jwt-bearer grants, not the client credentials grant, and its client authenticator
asks for `client_id` in the body, which RFC 6749 does not with HTTP Basic. It implements the
client credentials grant (RFC 6749 section 4.4) strictly, answering with the SDK's token and
error models: client authentication by HTTP Basic or by the body (section 2.3.1), never both
(400 `invalid_request`); a missing, unknown or wrong client is 401 `invalid_client` (with
`WWW-Authenticate: Basic` when Basic was tried); a body that is not a form or has no
`grant_type` is 400 `invalid_request`; another grant 400 `unsupported_grant_type`; a scope it
does not know 400 `invalid_scope`; a `resource` (RFC 8707) other than the MCP server 400
`invalid_target`. A success is `{access_token, token_type: "Bearer", expires_in, scope}`
without a refresh token (section 4.4.3), never cached (section 5.1).

`token_requests` records each token request's form without the secret; `refused` each refused
token request's (status, error); `calls` each tool call.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.token import TokenErrorResponse
from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.provider import AccessToken, TokenErrorCode
from mcp.server.auth.routes import build_metadata
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import OAuthToken
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import Response

from controlcenter.tools.mcp.store import McpServerStore, OAuthChanges, StoredServer
from tests.fakes.server import LoopbackServer

MCP_PATH = "/mcp"
ISSUER_PATH = "/oauth"
TOKEN_PATH = "/oauth/token"
CLIENT_ID = "control-center"
CLIENT_SECRET = "cs-7d1f0a9b2c4e6f8a0b1c3d5e"
SCOPES = ("listings:read", "listings:write")
_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


@dataclass
class FakeOAuthMcp:
    server: LoopbackServer
    clients: dict[str, str] = field(default_factory=lambda: {CLIENT_ID: CLIENT_SECRET})
    issued: dict[str, AccessToken] = field(default_factory=dict)
    expires_in: int = 3600
    token_requests: list[dict[str, str]] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    asgi: Any = None

    @property
    def url(self) -> str:
        return self.server.url + MCP_PATH

    @property
    def issuer(self) -> str:
        return self.server.url + ISSUER_PATH

    def reset(self) -> None:
        self.clients = {CLIENT_ID: CLIENT_SECRET}
        self.issued.clear()
        self.expires_in = 3600
        self.token_requests.clear()
        self.refused.clear()
        self.calls.clear()


class _Verifier:
    """The MCP server's token verifier: the tokens the authorization server issued."""

    def __init__(self, fake: FakeOAuthMcp) -> None:
        self._fake = fake

    async def verify_token(self, token: str) -> AccessToken | None:
        return self._fake.issued.get(token)


def build_fake_oauth_mcp() -> FakeOAuthMcp:
    fake = FakeOAuthMcp(server=LoopbackServer(_placeholder))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        # Built at the first event (the lifespan's start), once the port is known: the
        # metadata names the server's own addresses.
        if fake.asgi is None:
            fake.asgi = _app(fake)
        await fake.asgi(scope, receive, send)

    fake.server = LoopbackServer(app, uvicorn_options={"lifespan": "on"})
    return fake


def _app(fake: FakeOAuthMcp) -> Any:
    mcp = MCPServer(
        "oauth-listings",
        log_level="WARNING",
        token_verifier=_Verifier(fake),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(fake.issuer),
            resource_server_url=AnyHttpUrl(fake.url),
            required_scopes=[SCOPES[0]],
            validate_token_resource=True,
        ),
    )

    @mcp.tool(
        description="Look up a listing by its MLS number.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    async def lookup_listing(mls_number: str) -> dict[str, Any]:
        fake.calls.append(("lookup_listing", {"mls_number": mls_number}))
        return {"mlsNumber": mls_number, "status": "active"}

    @mcp.tool(description="Archive a listing.")
    async def archive_listing(mls_number: str) -> str:
        fake.calls.append(("archive_listing", {"mls_number": mls_number}))
        return f"archived {mls_number}"

    metadata = build_metadata(
        AnyHttpUrl(fake.issuer), None, ClientRegistrationOptions(), RevocationOptions()
    ).model_copy(
        update={
            "token_endpoint": AnyHttpUrl(fake.server.url + TOKEN_PATH),
            "grant_types_supported": ["client_credentials"],
            "scopes_supported": list(SCOPES),
        }
    )
    mcp.custom_route(f"/.well-known/oauth-authorization-server{ISSUER_PATH}", ["GET"])(
        MetadataHandler(metadata).handle
    )

    async def token(request: Request) -> Response:
        return await _token(fake, request)

    mcp.custom_route(TOKEN_PATH, ["POST"])(token)

    return mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def _refuse(
    fake: FakeOAuthMcp, status: int, error: TokenErrorCode, description: str, basic: bool = False
) -> Response:
    fake.refused.append((status, error))
    headers = dict(_NO_STORE)
    if basic:
        headers["WWW-Authenticate"] = 'Basic realm="oauth"'
    body = TokenErrorResponse(error=error, error_description=description)
    return PydanticJSONResponse(content=body, status_code=status, headers=headers)


async def _token(fake: FakeOAuthMcp, request: Request) -> Response:
    if request.headers.get("content-type", "").split(";")[0] != "application/x-www-form-urlencoded":
        return _refuse(fake, 400, "invalid_request", "the body must be a form")
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    fake.token_requests.append({k: v for k, v in form.items() if k != "client_secret"})
    authorization = request.headers.get("authorization", "")
    basic = authorization.lower().startswith("basic ")
    if basic and ("client_secret" in form):
        return _refuse(fake, 400, "invalid_request", "more than one client authentication")
    if basic:
        try:
            decoded = base64.b64decode(authorization[6:], validate=True).decode()
            client_id, _, secret = decoded.partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
        except (binascii.Error, UnicodeDecodeError):
            return _refuse(fake, 401, "invalid_client", "malformed Basic credentials", True)
    else:
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
    known = fake.clients.get(client_id)
    if not client_id or not secret:
        return _refuse(fake, 401, "invalid_client", "client authentication is required", basic)
    if known is None or not secrets.compare_digest(known.encode(), secret.encode()):
        return _refuse(fake, 401, "invalid_client", "client authentication failed", basic)
    grant = form.get("grant_type")
    if not grant:
        return _refuse(fake, 400, "invalid_request", "grant_type is required")
    if grant != "client_credentials":
        return _refuse(fake, 400, "unsupported_grant_type", f"{grant} is not supported")
    asked = form.get("scope", " ".join(SCOPES)).split()
    if not asked or any(s not in SCOPES for s in asked):
        return _refuse(fake, 400, "invalid_scope", "unknown scope")
    resource = form.get("resource")
    if resource is not None and resource.rstrip("/") != fake.url:
        return _refuse(fake, 400, "invalid_target", "unknown resource")
    access = "at-" + secrets.token_hex(16)
    fake.issued[access] = AccessToken(
        token=access,
        client_id=client_id,
        scopes=asked,
        expires_at=int(time.time()) + fake.expires_in,
        resource=resource or fake.url,
    )
    body = OAuthToken(access_token=access, expires_in=fake.expires_in, scope=" ".join(asked))
    return PydanticJSONResponse(content=body, headers=_NO_STORE)


async def _placeholder(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("replaced before start")


@contextlib.asynccontextmanager
async def stored_oauth(
    store: McpServerStore, fake: FakeOAuthMcp, user_id: str, name: str, secret: str
) -> AsyncIterator[StoredServer]:
    """This fake stored as a server behind OAuth (client credentials with `secret`) in a
    running service's store, which forgets its servers afterwards: the tables are emptied
    behind its back."""
    created = await store.create(
        name=name,
        url=fake.url,
        enabled=True,
        bearer_token="",
        headers={},
        user_id=user_id,
        oauth=OAuthChanges(CLIENT_ID, secret, fake.issuer),
    )
    try:
        yield created
    finally:
        store.forget()
