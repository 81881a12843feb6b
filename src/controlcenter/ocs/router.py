"""The dashboard API index (SPEC 4.1, CONTRACT section 4), answered as Nextcloud's OCS does.

Kept free of FastAPI dependencies and body parsing: it is the hot path that gets benchmarked,
and every answer except the 200 is pre-rendered.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response

from controlcenter.auth.dependencies import SESSION_COOKIE
from controlcenter.ocs.envelope import (
    NOT_FOUND,
    NOT_LOGGED_IN,
    Format,
    choose_format,
    envelope,
    media_type,
    render,
)
from controlcenter.ocs.service import index_caller, index_message
from controlcenter.services import get_services

router = APIRouter()

PATH = "/ocs/v2.php/apps/{app_id}/api"
_CSRF_FAILED = b'{"message":"CSRF check failed"}'
_UNAUTHORISED = {fmt: render(envelope(997, NOT_LOGGED_IN, []), fmt) for fmt in ("json", "xml")}
_NOT_FOUND = {fmt: render(envelope(404, NOT_FOUND, []), fmt) for fmt in ("json", "xml")}


def _ocs_schema(data: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "type": "object",
        "required": ["status", "statuscode"],
        "properties": {
            "status": {"type": "string"},
            "statuscode": {"type": "integer"},
            "message": {"type": "string"},
            "totalitems": {"type": "string"},
            "itemsperpage": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "required": ["ocs"],
        "properties": {
            "ocs": {
                "type": "object",
                "required": ["meta", "data"],
                "properties": {"meta": meta, "data": data},
            }
        },
    }


_OPENAPI: dict[str, Any] = {
    "security": [{"bearer_auth": []}, {"basic_auth": []}],
    "parameters": [
        {
            "name": "OCS-APIRequest",
            "in": "header",
            "description": "Required to be true for the API request to pass",
            "required": True,
            "schema": {"type": "boolean", "default": True},
        },
    ],
    "responses": {
        "200": {
            "description": "Data returned",
            "content": {
                "application/json": {
                    "schema": _ocs_schema(
                        {
                            "type": "object",
                            "required": ["message"],
                            "properties": {"message": {"type": "string"}},
                        }
                    )
                }
            },
        },
        "401": {
            "description": "Current user is not logged in",
            "content": {"application/json": {"schema": _ocs_schema({})}},
        },
        "404": {
            "description": "Another app id: no such OCS route",
            "content": {"application/json": {"schema": _ocs_schema({})}},
        },
        "412": {
            "description": "The OCS-APIRequest header is missing or not true",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["message"],
                        "properties": {"message": {"type": "string"}},
                    }
                }
            },
        },
    },
}

SECURITY_SCHEMES: dict[str, Any] = {
    "bearer_auth": {
        "type": "http",
        "scheme": "bearer",
        "description": "A session JWT or an API token",
    },
    "basic_auth": {
        "type": "http",
        "scheme": "basic",
        "description": "E-mail with the password or an API token",
    },
}


@router.get(
    PATH,
    operation_id="api-index",
    tags=["api"],
    summary="Get the dashboard API index",
    response_class=Response,
    openapi_extra=_OPENAPI,
)
async def api_index(app_id: str, request: Request) -> Response:
    headers = request.headers
    fmt: Format = choose_format(request.query_params.get("format"), headers.get("accept"))
    services = await get_services(request)
    config = services.config
    if app_id != config.app_id:
        return Response(_NOT_FOUND[fmt], status_code=404, media_type=media_type(fmt))
    principal = await index_caller(
        services.db,
        authorization=headers.get("authorization"),
        session_cookie=request.cookies.get(SESSION_COOKIE),
        key=config.jwt_key,
    )
    if principal is None:
        return Response(_UNAUTHORISED[fmt], status_code=401, media_type=media_type(fmt))
    if headers.get("ocs-apirequest", "").strip().lower() != "true":
        # Nextcloud's security middleware answers this in JSON whatever format was asked.
        return Response(_CSRF_FAILED, status_code=412, media_type="application/json")
    body = render(envelope(200, "OK", {"message": index_message(principal.user)}), fmt)
    return Response(body, status_code=200, media_type=media_type(fmt))


def document_security(app: FastAPI) -> None:
    """Declare the index's security schemes in /openapi.json (FastAPI only derives them from
    security dependencies, which this route avoids on its hot path)."""

    build = app.openapi

    def openapi() -> dict[str, Any]:
        first = app.openapi_schema is None
        schema = build()  # FastAPI caches it in app.openapi_schema
        if first:
            schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes.update(SECURITY_SCHEMES)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
