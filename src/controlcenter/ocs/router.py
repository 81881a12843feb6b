"""The dashboard API index (SPEC 4.1, CONTRACT section 4), answered as Nextcloud's OCS does.

The route documents the index and answers HEAD and other methods; GET, the hot path that
gets benchmarked, is answered by `ocs.index.IndexFastPath` in front of the framework.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response

from controlcenter.auth.refusals import client_address
from controlcenter.ocs.index import PATH, answer_index
from controlcenter.web.deps import ConfigDep, DatabaseDep

router = APIRouter()


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
async def api_index(
    app_id: str, request: Request, database: DatabaseDep, config: ConfigDep
) -> Response:
    # GET normally never gets here: `IndexFastPath` answers it in front of the framework.
    # This route answers HEAD and the other methods, and documents the index in /openapi.json.
    return await answer_index(
        database,
        config,
        app_id,
        request.headers,
        request.query_params,
        client_address(request),
    )


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
