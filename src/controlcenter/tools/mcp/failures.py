"""Why a request to an MCP server failed, in a short reason that names no address and carries
no stored credential: the HTTP refusal (status and the server's message), a timeout, no
connection, an OAuth flow that stopped. Every reason the status, the connection test, the
chat's tool errors and the log show is made here, through `common.secrets.remote_text`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from controlcenter.admin_settings.names import SECRET_NAMES
from controlcenter.common.connections import unconnected
from controlcenter.common.secrets import remote_text
from controlcenter.tools.mcp.server import McpServer


class RemoteRefusalError(Exception):
    """The server refused with an HTTP error status; the message is its status and text."""


SDK_REFUSAL = "Server returned an error response"
# The SDK's words for a session whose connection is gone (the code alone is not enough: the
# SDK gives it to one request whose stream ended, on a session that lives on, and a server may
# answer with it).
_SDK_CLOSED = "Connection closed"
# A session's opening that failed without an answer: no connection (`never_connected`), or
# one lost. Inside an open session the SDK reports a lost one as CONNECTION_CLOSED.
CONNECT_FAILURES = (httpx2.ConnectError, httpx2.ConnectTimeout)
CANNOT_CONNECT = "cannot connect to the server"
# Kept of a refusal's body before `remote_text` removes the secrets and cuts it: far beyond
# its cut, so a secret is never split at this bound.
_REFUSAL_CHARS = 16_000
_ADDRESS = re.compile(r"\S+://\S+")  # an address in an error's text: it may carry credentials


def refusal_text(response: httpx2.Response) -> str:
    """`HTTP 401 Unauthorized: <the server's message>`, the message from a JSON body's
    `message`, `error_description` or `error`, else the body's text. Raw: it is shown only
    through `describe_failure`."""
    text = response.text.strip()
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "error_description", "error"):
            if isinstance(body.get(key), str):
                text = body[key]
                break
    status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    return f"{status}: {text[:_REFUSAL_CHARS]}" if text else status


def innermost(exc: BaseException) -> BaseException:
    """The innermost error of anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def never_connected(exc: BaseException) -> bool:
    """Whether no connection was made for the request, so the server cannot have run it."""
    exc = innermost(exc)
    return isinstance(exc, CONNECT_FAILURES) and unconnected(exc) is not None


def connection_closed(exc: BaseException) -> bool:
    """Whether the session's connection closed under the request: the session is of no more
    use, and the server may have run the request (it may have closed after receiving it)."""
    exc = innermost(exc)
    return isinstance(exc, MCPError) and (exc.code, exc.message) == (CONNECTION_CLOSED, _SDK_CLOSED)


def known_secrets(server: McpServer, settings: Mapping[str, str] | None) -> list[str]:
    """The credentials a text about `server` must not carry: its own, and the secret settings
    (the providers' and the CRM's keys) the snapshot holds."""
    held = [v for n, v in (settings or {}).items() if n in SECRET_NAMES]
    return [*server.secrets(), *held]


def describe_failure(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """A short reason: the innermost error of anyio's exception groups, without addresses,
    with `secrets` and anything shaped like a credential removed, cut short (`remote_text`)."""
    return remote_text(_reason(innermost(exc)), secrets)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, RemoteRefusalError):
        return str(exc)
    if never_connected(exc):
        return CANNOT_CONNECT
    if isinstance(exc, CONNECT_FAILURES) or connection_closed(exc):
        return "connection lost"
    if isinstance(exc, OAuthFlowError):
        return "OAuth failed: " + _ADDRESS.sub("<address>", str(exc))
    return type(exc).__name__ + (f": {exc}" if str(exc) and "://" not in str(exc) else "")
