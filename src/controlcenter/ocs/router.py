"""The dashboard API index, answered as Nextcloud's OCS does.

The route is the index's documented operation, with its security schemes declared in its
description; `answer_index` judges the credentials and writes the answer. The route has no
dependency: each costs FastAPI's resolution on every request, and it reads the app's
`DashboardIndex` (`app.state.index`) itself.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.openapi.models import HTTPBase

from controlcenter.auth.deps import SESSION_COOKIE
from controlcenter.auth.refusals import client_address
from controlcenter.ocs.index import PATH, DashboardIndex, answer_index

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


# The index reads the credentials itself (`answer_index`), so its two schemes are declared for
# the interface description only: in the operation (`openapi_extra`) and in the components
# (`declare_schemes`), not as security dependencies FastAPI would resolve on every request.
_SCHEMES = {
    "bearer_auth": HTTPBase(scheme="bearer", description="A session JWT or an API token"),
    "basic_auth": HTTPBase(scheme="basic", description="E-mail with the password or an API token"),
}
_ENVELOPE = {"application/json": {"schema": _ocs_schema({})}}
_OPENAPI: dict[str, Any] = {
    # Either scheme: one requirement each.
    "security": [{name: []} for name in _SCHEMES],
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


def declare_schemes(app: FastAPI) -> None:
    """Add the index's schemes to the app's OpenAPI components, as FastAPI's documentation
    extends the schema: `app.openapi` replaced by a function that completes the generated one."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # made on the first call, then kept (`app.openapi_schema`)
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        for name, scheme in _SCHEMES.items():
            schemes.setdefault(
                name, scheme.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


@router.get(
    PATH,
    operation_id="api-index",
    tags=["api"],
    summary="Get the dashboard API index",
    response_class=Response,
    # Declared here, not in `_OPENAPI`, so that FastAPI adds no 422: the index never answers it.
    responses={"4XX": {"description": "Any other refusal", "content": _ENVELOPE}},
    openapi_extra=_OPENAPI,
)
async def api_index(
    app_id: str,
    request: Request,
) -> Response:
    """The index, for a session JWT or an API token (bearer) or for a password (basic)."""
    index: DashboardIndex = request.app.state.index
    headers = request.headers
    return await answer_index(
        index,
        app_id,
        authorization=headers.get("authorization"),
        session_cookie=request.cookies.get(SESSION_COOKIE),
        accept=headers.get("accept"),
        ocs_apirequest=headers.get("ocs-apirequest"),
        query_format=request.query_params.get("format"),
        client=client_address(request),
    )
