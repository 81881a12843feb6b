"""The dashboard baseline: a bare Starlette app answering the service's JSON on the same path.

The body is the service's own answer, passed in BENCH_BARE_BODY, so both send the same bytes.
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PATH = os.environ.get("BENCH_BARE_PATH", "/ocs/v2.php/apps/dashboard/api")
BODY = os.environ.get("BENCH_BARE_BODY", '{"ocs":{"meta":{},"data":{}}}').encode()


async def index(request: Request) -> Response:
    return Response(BODY, media_type="application/json")


async def healthz(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(routes=[Route(PATH, index), Route("/healthz", healthz)])
