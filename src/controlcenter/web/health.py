"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text

from controlcenter.web.deps import DatabaseDep
from controlcenter.web.openapi_doc import schema_extra

router = APIRouter(tags=["health"])


class Status(BaseModel):
    model_config = schema_extra({"status": "ok"})
    status: Literal["ok", "unavailable"]


_UNAVAILABLE = {"description": "The database does not answer", "model": Status}


@router.get("/healthz", response_model=None, responses={200: {"model": Status}})
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_model=None, responses={200: {"model": Status}, 503: _UNAVAILABLE})
async def readyz(database: DatabaseDep) -> JSONResponse:
    try:
        async with database.read() as db:
            await db.execute(text("SELECT 1"))
    except Exception:
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
