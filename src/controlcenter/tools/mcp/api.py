"""/api/v1/admin/mcp-servers: the MCP servers beside the setting `mcpServerUrl` (super
administrators only). Credentials are answered masked (`store.server_view`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.convertors import Convertor, register_url_convertor

from controlcenter.admin_settings.deps import SettingsDep
from controlcenter.auth.deps import SuperAdmin
from controlcenter.common.logs import get_logger
from controlcenter.tools.mcp import store as mcp_store
from controlcenter.tools.mcp.deps import McpSourceDep, McpStoreDep
from controlcenter.tools.mcp.schemas import (
    SERVER_EXAMPLE,
    McpServerAnswer,
    McpServerCreate,
    McpServerList,
    McpServerPatch,
    McpServerStates,
)
from controlcenter.tools.mcp.status import STATUS_SETTINGS, server_states
from controlcenter.web.body import read_model
from controlcenter.web.errors import ApiError, describe
from controlcenter.web.openapi_doc import Success, answers, json_body

router = APIRouter(prefix="/api/v1/admin/mcp-servers", tags=["mcp servers"])
log = get_logger(__name__)

NOT_FOUND = "MCP server not found"
NAME_TAKEN = "An MCP server with this name already exists"
FETCH_FAILED = "Failed to fetch MCP servers"
STATUS_TIMEOUT_S = 8.0  # each server's listing, all at once: the answer comes within 10 s


class ServerIdConvertor(Convertor[str]):
    """A server's id in a path: any segment but the fixed one beside it (`status`), so
    `PATCH .../status` answers 405 with `/status`'s own `Allow` instead of looking for a server
    named by it."""

    regex = "(?!status(?:/|$))[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("mcp_server_id", ServerIdConvertor())


def _masked_unknown(exc: mcp_store.MaskedUnknownError) -> ApiError:
    issue = {
        "path": exc.path,
        "message": "a masked value can only keep a stored one",
        "type": "masked_value",
    }
    return ApiError(400, "Validation failed", details=[issue])


def _credentials_refused(exc: mcp_store.CredentialsError) -> ApiError:
    issue = {"path": [exc.field], "message": exc.message, "type": "credentials"}
    return ApiError(400, "Validation failed", details=[issue])


def _oauth_changes(body: McpServerCreate | McpServerPatch) -> mcp_store.OAuthChanges:
    return mcp_store.OAuthChanges(
        client_id=body.oauthClientId,
        client_secret=body.oauthClientSecret,
        issuer=body.oauthIssuer,
    )


@router.get("", **answers(McpServerList, 403, 500, example={"servers": [SERVER_EXAMPLE]}))
async def list_servers(principal: SuperAdmin, store: McpStoreDep) -> dict[str, Any]:
    """Every stored server by name, credentials masked."""
    try:
        stored = await store.all()
    except Exception as exc:
        # Typically SettingsDecryptError (the key changed): it names the server, not a value.
        log.error("reading MCP servers failed", error=describe(exc))
        raise ApiError(500, FETCH_FAILED) from exc
    return {"servers": [mcp_store.server_view(s) for s in stored]}


@router.post(
    "",
    **answers(
        McpServerAnswer,
        400,
        403,
        409,
        413,
        status=201,
        write=True,
        example={"server": SERVER_EXAMPLE},
    ),
    openapi_extra=json_body(McpServerCreate),
)
async def create_server(
    request: Request, principal: SuperAdmin, store: McpStoreDep
) -> JSONResponse:
    body = await read_model(request, McpServerCreate)
    try:
        stored = await store.create(
            name=body.name,
            url=body.url,
            enabled=body.enabled,
            bearer_token=body.bearerToken,
            headers=body.headers,
            user_id=principal.user.id,
            oauth=_oauth_changes(body),
        )
    except mcp_store.NameTakenError as exc:
        raise ApiError(409, NAME_TAKEN) from exc
    except mcp_store.MaskedUnknownError as exc:
        raise _masked_unknown(exc) from exc
    except mcp_store.CredentialsError as exc:
        raise _credentials_refused(exc) from exc
    log.info("MCP server added", server=stored.server.name, user_id=principal.user.id)
    return JSONResponse({"server": mcp_store.server_view(stored)}, status_code=201)


@router.get(
    "/status",
    **answers(
        McpServerStates,
        403,
        500,
        example={
            "servers": [
                {
                    "name": "HighLevel",
                    "state": "working",
                    "toolCount": 21,
                    "ok": True,
                    "detail": "21 tools",
                }
            ]
        },
    ),
)
async def server_status(
    principal: SuperAdmin, source: McpSourceDep, settings: SettingsDep
) -> dict[str, Any]:
    """Every configured server (the setting `mcpServerUrl`'s first) listed now: its state and
    its tool count."""
    try:
        snapshot = await settings.get_many(STATUS_SETTINGS)
        states = await server_states(source, snapshot, timeout_s=STATUS_TIMEOUT_S)
    except Exception as exc:
        log.error("reading MCP servers failed", error=describe(exc))
        raise ApiError(500, FETCH_FAILED) from exc
    return {"servers": [state.json() for state in states]}


@router.patch(
    "/{server_id:mcp_server_id}",
    **answers(
        McpServerAnswer, 400, 403, 404, 409, 413, write=True, example={"server": SERVER_EXAMPLE}
    ),
    openapi_extra=json_body(McpServerPatch),
)
async def update_server(
    server_id: str, request: Request, principal: SuperAdmin, store: McpStoreDep
) -> dict[str, Any]:
    """Only the fields sent change; a masked credential sent back keeps the stored one."""
    body = await read_model(request, McpServerPatch)
    # The body refuses null, so a field is None exactly when it was not sent.
    changes = mcp_store.ServerChanges(
        name=body.name,
        url=body.url,
        enabled=body.enabled,
        bearer_token=body.bearerToken,
        headers=body.headers,
        oauth=_oauth_changes(body),
    )
    try:
        stored = await store.update(server_id, changes, principal.user.id)
    except mcp_store.ServerNotFoundError as exc:
        raise ApiError(404, NOT_FOUND) from exc
    except mcp_store.NameTakenError as exc:
        raise ApiError(409, NAME_TAKEN) from exc
    except mcp_store.MaskedUnknownError as exc:
        raise _masked_unknown(exc) from exc
    except mcp_store.CredentialsError as exc:
        raise _credentials_refused(exc) from exc
    log.info("MCP server changed", server=stored.server.name, user_id=principal.user.id)
    return {"server": mcp_store.server_view(stored)}


@router.delete("/{server_id:mcp_server_id}", **answers(Success, 403, 404, write=True))
async def delete_server(
    server_id: str, principal: SuperAdmin, store: McpStoreDep
) -> dict[str, Any]:
    try:
        await store.delete(server_id)
    except mcp_store.ServerNotFoundError as exc:
        raise ApiError(404, NOT_FOUND) from exc
    log.info("MCP server removed", server_id=server_id, user_id=principal.user.id)
    return {"success": True}
