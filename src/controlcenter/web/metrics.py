"""GET /metrics: the Prometheus text format, behind `METRICS_TOKEN` when set
(`docs/deploy.md`): without the right `Authorization: Bearer` it is 401, like any request
without valid credentials."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from controlcenter.observability.metrics import exposition
from controlcenter.web.deps import ConfigDep

router = APIRouter()


def _allowed(token: str | None, authorization: str | None) -> bool:
    if not token:
        return True
    expected = f"Bearer {token}".encode()
    return authorization is not None and hmac.compare_digest(authorization.encode(), expected)


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, config: ConfigDep) -> Response:
    if not _allowed(config.metrics_token, request.headers.get("authorization")):
        return JSONResponse(
            {"error": "Unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )
    body, content_type = exposition(request.headers.get("accept", ""))
    return Response(body, headers={"Content-Type": content_type})
