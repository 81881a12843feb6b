"""OAuth for the MCP servers that require it: the `mcp` SDK's client credentials provider, one
per server, its tokens kept in memory.

The provider is the httpx auth of the server's HTTP client, so discovery (the protected
resource metadata the server points to, then the authorization server's metadata), the token
request and the retry after a 401 are the SDK's. One provider a server, shared by every
session to it, so a token obtained for one chat serves the next ones until it expires; a
changed configuration (address or credentials) gets a new provider, without the old tokens.

Only the client credentials grant is offered: the authorization-code grant needs a person to
consent in a browser, and the chats that use these servers run with no one at the keyboard of
the server's account.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from controlcenter.tools.mcp.server import OAuthClient


class MemoryTokens(TokenStorage):
    """The SDK's token storage in memory, for one server: a token whose `expires_in` has passed
    (by `clock`) is not handed out again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tokens: OAuthToken | None = None
        self._expires_at: float | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        if self._expires_at is not None and self._clock() >= self._expires_at:
            self._tokens = self._expires_at = None
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens
        expires_in = tokens.expires_in
        self._expires_at = None if expires_in is None else self._clock() + int(expires_in)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


class ServerAuth:
    """The OAuth provider of one server as configured (address and credentials)."""

    def __init__(self, url: str, client: OAuthClient) -> None:
        self.key = (url, client)
        self.tokens = MemoryTokens()
        self.provider = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=self.tokens,
            client_id=client.client_id,
            client_secret=client.client_secret,
            issuer=client.issuer or None,
        )


class OAuthProviders:
    """Each server's provider, by server name; replaced (its tokens dropped) when the server's
    address or credentials change, dropped when it has no credentials any more or is no
    longer in use (deleted or disabled: its secret and token leave the process's memory)."""

    def __init__(self) -> None:
        self._by_server: dict[str, ServerAuth] = {}

    def provider(
        self, server: str, url: str, client: OAuthClient | None
    ) -> ClientCredentialsOAuthProvider | None:
        if client is None:
            self._by_server.pop(server, None)
            return None
        held = self._by_server.get(server)
        if held is None or held.key != (url, client):
            held = self._by_server[server] = ServerAuth(url, client)
        return held.provider

    def keep(self, servers: Collection[str]) -> None:
        """Drops the providers of the servers not named."""
        for name in self._by_server.keys() - set(servers):
            del self._by_server[name]
