"""The dashboard API index, answered as Nextcloud's OCS does.

The route is the index's documented operation, with its security schemes declared by FastAPI
security dependencies; `answer_index` judges the credentials and writes the answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, Security
from fastapi.security import HTTPBasic, HTTPBearer

from controlcenter.auth.deps import SESSION_COOKIE
from controlcenter.auth.refusals import client_address
from controlcenter.ocs.index import PATH, DashboardIndex, answer_index

router = APIRouter()


async def get_index(request: Request) -> DashboardIndex:
    """The app's `DashboardIndex`: one dependency for all the index reads of the app (each
    dependency costs FastAPI's resolution on every request). Async, so `Depends` resolves it
    on the event loop instead of a thread-pool hop per request."""
    index: DashboardIndex = request.app.state.index
    return index


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


_ENVELOPE = {"application/json": {"schema": _ocs_schema({})}}
_OPENAPI: dict[str, Any] = {
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


class _DeclaredBearer(HTTPBearer):
    """The bearer scheme as the interface description shows it. It reads nothing: the index
    judges the credentials itself (`answer_index`)."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        return None


class _DeclaredBasic(HTTPBasic):
    """The basic scheme as the interface description shows it (see `_DeclaredBearer`)."""

    async def __call__(self, request: Request) -> None:  # type: ignore[override]
        return None


# Either scheme: FastAPI lists each as its own requirement, and declares both in the components.
_BEARER = _DeclaredBearer(scheme_name="bearer_auth", description="A session JWT or an API token")
_BASIC = _DeclaredBasic(
    scheme_name="basic_auth", description="E-mail with the password or an API token"
)


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
    index: Annotated[DashboardIndex, Depends(get_index)],
    _bearer: Annotated[None, Security(_BEARER)],
    _basic: Annotated[None, Security(_BASIC)],
) -> Response:
    """The index; its security schemes are declared here."""
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
