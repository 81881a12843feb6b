"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.orm import Session

from controlcenter.web.deps import DatabaseDep
from controlcenter.web.openapi_doc import schema_extra

router = APIRouter(tags=["health"])


class Status(BaseModel):
    model_config = schema_extra({"status": "ok"})
    status: Literal["ok", "unavailable"]


_ONE = text("SELECT 1")
_UNAVAILABLE = {"description": "The database does not answer", "model": Status}


@router.get("/healthz", response_model=None, responses={200: {"model": Status}})
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def _select_one(session: Session) -> None:
    session.execute(_ONE)


@router.get("/readyz", response_model=None, responses={200: {"model": Status}, 503: _UNAVAILABLE})
async def readyz(database: DatabaseDep) -> JSONResponse:
    try:
        await database.run_read(_select_one)
    except Exception:
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
