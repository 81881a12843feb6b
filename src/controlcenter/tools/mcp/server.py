"""One MCP server as the service connects to it: its name, address and credentials, and the
headers of a chat's request to it, which may carry the broker's CRM location.

A header value may contain the placeholder `{crmLocationId}`: it is replaced by the CRM
location linked to the broker the chat is for (`controlcenter users set-crm`, or the users
page). A server with such a header serves a broker only when he has a location; for a broker
without one it offers nothing. The placeholder is the only one; any other text is sent as it is.

A server's requests carry at most one credential in `Authorization`: its bearer token, or an
access token the service obtains with its OAuth client credentials (the client credentials
grant, through the `mcp` SDK's provider); never both.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from controlcenter.admin_settings.names import MCP_SERVER_URL
from controlcenter.admin_settings.usable import credential_problem, url_problem
from controlcenter.common.secrets import MASK, basic_credentials

LOCATION_PLACEHOLDER = "{crmLocationId}"

# The server at the setting `mcpServerUrl` is listed under the setting's name.
SETTING_SERVER = MCP_SERVER_URL


@dataclass(frozen=True)
class OAuthClient:
    """OAuth client credentials for a server that requires OAuth: a token is obtained from the
    authorization server with the client credentials grant, for the scope the MCP server asks
    for. `issuer` "" takes the authorization server the MCP server names."""

    client_id: str
    client_secret: str = field(repr=False)  # kept out of the repr like every credential
    issuer: str = ""

    def problem(self) -> str | None:
        """Why the credentials cannot be used (never quoting a value), or None."""
        for label, value in (("client id", self.client_id), ("client secret", self.client_secret)):
            if not value or credential_problem(value) is not None:
                return f"its OAuth {label} cannot be sent (a credential must be printable ASCII)"
        if self.issuer and url_problem(self.issuer) is not None:
            return f"its OAuth issuer cannot be used ({url_problem(self.issuer)})"
        return None


class NeedsLocationError(Exception):
    """The server's headers carry the broker's CRM location and the broker has none."""


@dataclass(frozen=True)
class McpServer:
    name: str
    url: str
    # Credentials: kept out of the repr, so a logged or raised server never shows them.
    bearer_token: str = field(default="", repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # (name, template)
    oauth: OAuthClient | None = field(default=None, repr=False)

    def problem(self) -> str | None:
        """Why the server cannot be used as configured (never quoting a value), or None."""
        url = url_problem(self.url)
        if url is not None:
            return f"its address cannot be used ({url})"
        if userinfo_secrets(self.url):
            # Stored before such addresses were refused: never sent, so never echoed.
            return "its address carries a user name or password, which is never sent"
        for name, value in self.headers:
            if credential_problem(value.replace(LOCATION_PLACEHOLDER, "")) is not None:
                return f"its header {name} cannot be sent (a header value must be printable ASCII)"
        if self.bearer_token and credential_problem(self.bearer_token) is not None:
            return "its bearer token cannot be sent (a credential must be printable ASCII)"
        if self.oauth is not None:
            return self.oauth.problem()
        return None

    def secrets(self) -> tuple[str, ...]:
        """Every credential this server is configured with, in the forms a request carries
        them (the header values, the bearer token, the OAuth client secret and its HTTP Basic
        pair, the address's userinfo and its Basic pair): what `remote_text` removes from the
        server's answers."""
        found = [self.bearer_token]
        found += [value.replace(LOCATION_PLACEHOLDER, "").strip() for _, value in self.headers]
        if self.oauth is not None:
            found += [
                self.oauth.client_secret,
                basic_credentials(self.oauth.client_id, self.oauth.client_secret),
            ]
        found += userinfo_secrets(self.url)
        return tuple(s for s in found if s)

    def request_headers(self, location_id: str | None) -> tuple[tuple[str, str], ...]:
        """The headers of a request for a broker with `location_id` (None: without one).

        Raises NeedsLocationError when a header needs the location and there is none."""
        location = (location_id or "").strip()
        sent: list[tuple[str, str]] = []
        for name, value in self.headers:
            if LOCATION_PLACEHOLDER in value:
                if not location or credential_problem(location) is not None:
                    raise NeedsLocationError(self.name)
                value = value.replace(LOCATION_PLACEHOLDER, location)
            sent.append((name, value))
        if self.bearer_token or self.oauth is not None:
            # The bearer token (or the OAuth access token, which the transport's auth sets) is
            # the Authorization header, whatever `headers` says.
            sent = [(n, v) for n, v in sent if n.lower() != "authorization"]
        if self.bearer_token:
            sent.append(("Authorization", f"Bearer {self.bearer_token}"))
        return tuple(sent)


def userinfo_secrets(url: str) -> list[str]:
    """The userinfo of an address (`user:password@`), as written, decoded and as the HTTP
    Basic pair a client makes of it; [] when there is none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    written = parts.netloc.rpartition("@")[0]
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [written, password, pair]


def shown_url(url: str) -> str:
    """An address as the API shows it: a userinfo (stored before such addresses were refused)
    masked."""
    if not userinfo_secrets(url):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{MASK}@{parts.netloc.rpartition('@')[2]}"))
