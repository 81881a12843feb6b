"""POST /api/v1/admin/integrations/{name}/test: super administrators only."""

from __future__ import annotations

from fastapi import APIRouter

from controlcenter.auth.deps import SuperAdmin
from controlcenter.integrations.deps import ConnectionsDep
from controlcenter.integrations.schemas import IntegrationTest
from controlcenter.integrations.service import INTEGRATIONS, UnknownIntegrationError
from controlcenter.web.errors import ApiError
from controlcenter.web.openapi_doc import answers

router = APIRouter(prefix="/api/v1/admin/integrations", tags=["settings"])

UNKNOWN_INTEGRATION = "Unknown integration"


@router.post(
    "/{name}/test",
    **answers(IntegrationTest, 403, 404, write=True),
    description="One harmless call with the stored settings; `name` one of "
    + ", ".join(INTEGRATIONS),
)
async def test_integration(
    name: str, principal: SuperAdmin, connections: ConnectionsDep
) -> IntegrationTest:
    try:
        ok, detail = await connections.test(name)
    except UnknownIntegrationError as exc:
        raise ApiError(404, UNKNOWN_INTEGRATION) from exc
    return IntegrationTest(ok=ok, detail=detail)
