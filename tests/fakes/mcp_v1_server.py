"""An MCP server of the `mcp` package's 1.x line (FastMCP), for the client's test against a
server of the handshake era (protocol 2025-06-18 and before).

Run by the Python of the separate environment `scripts/ensure-mcp1.sh` makes (the project's own
environment has mcp 2.x): `python tests/fakes/mcp_v1_server.py PORT` serves streamable HTTP at
`http://127.0.0.1:PORT/mcp` and prints `ready <protocol versions>` once it listens. Its
versions are cut to 2025-06-18 and older: it then answers as a server that knows no newer one.
It imports nothing of the project.
"""

from __future__ import annotations

import sys

import mcp.server.session
import mcp.shared.version
import uvicorn
from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations

PROTOCOL = "2025-06-18"
VERSIONS = [v for v in mcp.shared.version.SUPPORTED_PROTOCOL_VERSIONS if v <= PROTOCOL]
mcp.server.session.SUPPORTED_PROTOCOL_VERSIONS = VERSIONS
mcp.server.session.types.LATEST_PROTOCOL_VERSION = PROTOCOL


def main() -> None:
    port = int(sys.argv[1])
    app = FastMCP(
        "listings-v1",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @app.tool(
        title="Look up listing",
        description="Look up a listing by its MLS number.",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def lookup_listing(mls_number: str) -> dict[str, object]:
        return {"mlsNumber": mls_number, "protocol": PROTOCOL}

    config = uvicorn.Config(
        app.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    config.load()
    print("ready", " ".join(VERSIONS), flush=True)
    server.run()


if __name__ == "__main__":
    main()
