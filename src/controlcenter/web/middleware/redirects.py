"""Redirects never send a client to the host its `Host` header named.

The router's trailing-slash redirect builds an absolute `Location` from the request's `Host`
header: behind a proxy or cache that keys on something else, a forged `Host` makes the service
redirect other clients to the forger's site. This middleware turns every `Location` that
points at the request's own `Host` into a path on the same origin (`/a/b?c`), which browsers
and HTTP clients resolve against the address they actually used.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class RelativeRedirects:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def relative(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in _REDIRECTS:
                _make_relative(MutableHeaders(scope=message), Headers(scope=scope).get("host"))
            await send(message)

        await self.app(scope, receive, relative)


def _make_relative(headers: MutableHeaders, host: str | None) -> None:
    location = headers.get("location", "")
    for scheme in ("http", "https") if host else ():
        prefix = f"{scheme}://{host}"
        rest = location[len(prefix) :]
        if location.startswith(prefix) and rest[:1] in ("/", "?", ""):
            # "//evil" would be read as another host: keep a single leading slash.
            headers["location"] = "/" + rest.lstrip("/")
            return
