"""The interface description completed for client generators: every operation's request body,
every answer it can give with its schema, the security of every protected route, the chat's
event stream, and examples (docs/openapi.md).

FastAPI derives only what it sees: most routes read their bodies by hand (so that bad JSON
gets the SPEC's answers instead of FastAPI's 422) and raise `ApiError` for their refusals.
This module adds the rest once, when /openapi.json is first built.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI

from controlcenter.admin_settings.names import SETTING_NAMES
from controlcenter.onboarding.models import ARRAY_FIELDS, FIELDS

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], **properties: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": properties}


STRING: Schema = {"type": "string"}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
TIMESTAMP: Schema = {"type": "string", "format": "date-time"}
SUCCESS: Schema = obj(["success"], success={"type": "boolean", "const": True})

_ONBOARDING_TYPES = {"usingOtherCrm", "hasLeadSource", "wantsMoreLeads"}

SCHEMAS: dict[str, Schema] = {
    "Error": {
        **obj(["error"], error=STRING, details={"type": "array", "items": ref("Issue")}),
        "example": {"error": "Unauthorized"},
    },
    "Issue": {
        **obj(
            ["path", "message", "type"],
            path={"type": "array", "items": {"type": ["string", "integer"]}},
            message=STRING,
            type=STRING,
        ),
        "example": {
            "path": ["usingOtherCrm"],
            "message": "Input should be a valid boolean",
            "type": "bool_type",
        },
    },
    "LoginRequest": {
        **obj(["email", "password"], email=STRING, password=STRING),
        "example": {"email": "broker@example.com", "password": "correct horse battery"},
    },
    "User": obj(
        ["id", "email", "name", "role", "brokerage"],
        id=STRING,
        email=STRING,
        name=STRING,
        role={"type": "string", "enum": ["user", "admin", "super_admin"]},
        brokerage=NULLABLE_STRING,
    ),
    "AdminUser": {
        "allOf": [
            ref("User"),
            obj(
                ["createdAt", "disabled", "crmLocationId"],
                createdAt=TIMESTAMP,
                disabled={"type": "boolean"},
                crmLocationId=NULLABLE_STRING,
            ),
        ]
    },
    "ApiToken": obj(
        ["id", "label", "createdAt", "lastUsedAt"],
        id=STRING,
        label=STRING,
        createdAt=TIMESTAMP,
        lastUsedAt={"type": ["string", "null"], "format": "date-time"},
    ),
    "OnboardingRecord": obj(
        ["id", "userId", *FIELDS, "createdAt", "updatedAt"],
        id=STRING,
        userId=STRING,
        **{
            name: (
                {"type": ["boolean", "null"]}
                if name in _ONBOARDING_TYPES
                else {
                    **NULLABLE_STRING,
                    **({"description": "a JSON-encoded array"} if name in ARRAY_FIELDS else {}),
                }
            )
            for name in FIELDS
        },
        createdAt=TIMESTAMP,
        updatedAt=TIMESTAMP,
    ),
    "Settings": obj(list(SETTING_NAMES), **{name: STRING for name in SETTING_NAMES}),
    "ChatRequest": {
        **obj(
            ["message"],
            message={"type": "string", "minLength": 1, "description": "not blank"},
            conversationId={"type": "string", "description": "absent: a new conversation"},
            provider={
                "type": "string",
                "enum": ["provider_a", "provider_b"],
                "default": "provider_a",
            },
        ),
        "example": {"message": "Which contacts did I add this week?", "provider": "provider_a"},
    },
    "ToolCall": obj(
        ["id", "name", "arguments"], id=STRING, name=STRING, arguments={"type": "object"}
    ),
    "ToolResult": obj(
        ["toolCallId", "success"],
        toolCallId=STRING,
        success={"type": "boolean"},
        result={"description": "on success: the tool's result"},
        error={"type": "string", "description": "on failure"},
    ),
    "ChatMessage": obj(
        ["id", "role", "content", "createdAt"],
        id=STRING,
        role={"type": "string", "enum": ["user", "assistant"]},
        content=STRING,
        toolCalls={"type": "array", "items": ref("ToolCall")},
        toolResults={"type": "array", "items": ref("ToolResult")},
        createdAt=TIMESTAMP,
        usage=obj(  # CONTRACT 11: assistant messages
            ["inputTokens", "outputTokens", "providerCalls"],
            inputTokens={"type": "integer"},
            outputTokens={"type": "integer"},
            providerCalls={"type": "integer"},
        ),
    ),
    "Conversation": obj(
        ["id", "title"],
        id=STRING,
        title=STRING,
        createdAt=TIMESTAMP,
        updatedAt=TIMESTAMP,
        messages={"type": "array", "items": ref("ChatMessage")},
    ),
    "ChatPolicy": obj(
        ["toolApproval", "monthlyTokenQuota", "fallback", "contextTokenBudget"],
        toolApproval={"enum": ["off", "writes"]},
        monthlyTokenQuota={"type": ["integer", "null"], "minimum": 0},
        fallback={"type": "boolean"},
        contextTokenBudget={"type": "integer", "minimum": 1000},
    ),
    "UserUsage": obj(
        ["userId", "email", "name", "inputTokens", "outputTokens", "chats", "toolCalls"],
        userId=STRING,
        email=STRING,
        name=STRING,
        inputTokens={"type": "integer"},
        outputTokens={"type": "integer"},
        chats={"type": "integer"},
        toolCalls={"type": "integer"},
    ),
    "UiChatRequest": {
        **obj(
            ["messages"],
            id=STRING,
            messages={
                "type": "array",
                "description": "AI SDK UIMessages; the last must be the user's, with text parts",
                "items": {"type": "object"},
            },
            trigger=STRING,
            conversationId={"type": "string", "description": "absent: a new conversation"},
            provider={"type": "string", "enum": ["provider_a", "provider_b"]},
        ),
        "example": {
            "id": "chat-1",
            "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        },
    },
    "UiMessageChunk": {
        "description": "One `data:` frame of the AI SDK's UI message stream (then `[DONE]`).",
        **obj(
            ["type"],
            type={
                "enum": [
                    "start",
                    "text-start",
                    "text-delta",
                    "text-end",
                    "tool-input-available",
                    "tool-output-available",
                    "tool-output-error",
                    "finish",
                    "error",
                ]
            },
        ),
    },
    "ChatEvent": {
        "description": "One `data:` frame of the chat's event stream (SPEC 6).",
        "oneOf": [
            obj(
                ["type", "conversationId", "messageId"],
                type={"const": "message_start"},
                conversationId=STRING,
                messageId=STRING,
            ),
            obj(["type", "delta"], type={"const": "content_delta"}, delta=STRING),
            obj(["type", "toolCall"], type={"const": "tool_call_start"}, toolCall=ref("ToolCall")),
            obj(  # CONTRACT 11, with the chat policy's `fallback`
                ["type", "from", "to"],
                type={"const": "provider_fallback"},
                **{"from": {"enum": ["provider_a", "provider_b"]}},
                to={"enum": ["provider_a", "provider_b"]},
            ),
            obj(  # CONTRACT 11, with the chat policy's `toolApproval: "writes"`
                ["type", "toolCall"],
                type={"const": "tool_approval_required"},
                toolCall=ref("ToolCall"),
            ),
            obj(
                ["type", "toolResult"], type={"const": "tool_result"}, toolResult=ref("ToolResult")
            ),
            obj(
                ["type", "message"],
                type={"const": "message_complete"},
                message=ref("ChatMessage"),
                stopped={"type": "boolean", "const": True},  # CONTRACT 11: only when stopped
            ),
            obj(["type", "error"], type={"const": "error"}, error=STRING, code=STRING),
        ],
    },
}

SECURITY_SCHEMES: dict[str, Schema] = {
    "cookie_auth": {
        "type": "apiKey",
        "in": "cookie",
        "name": "session",
        "description": "The session cookie set by POST /api/v1/auth/login",
    },
}
SESSION_SECURITY: list[dict[str, list[str]]] = [{"bearer_auth": []}, {"cookie_auth": []}]

_STATUS_TEXT = {
    400: "Invalid JSON body, or `Validation failed` with `details`",
    401: "Unauthorized: no valid session",
    403: "Forbidden: the caller's role may not do this, or a cross-origin request with the "
    "session cookie (`Cross-origin request refused`)",
    404: "Not found",
    409: "Conflict",
    413: "Request body too large",
    429: "Too many attempts",
    500: "The operation failed",
}


def _json(schema: Schema, example: Any = None) -> Schema:
    content: Schema = {"schema": schema}
    if example is not None:
        content["example"] = example
    return {"application/json": content}


_USER_EXAMPLE = {
    "id": "7c0e0c6a-2b8e-4d2f-9f55-1b0f2a3c4d5e",
    "email": "broker@example.com",
    "name": "Dana Broker",
    "role": "user",
    "brokerage": "Harbor Commercial",
}
_ADMIN_USER_EXAMPLE = {
    **_USER_EXAMPLE,
    "createdAt": "2026-11-23T09:00:00.000Z",
    "disabled": False,
    "crmLocationId": None,
}

# Per operation: the success answer (status, schema, example) and the refusals it can give.
_OPS: dict[tuple[str, str], tuple[int, Schema | None, Any, tuple[int, ...]]] = {
    ("post", "/api/v1/auth/login"): (
        200, obj(["token", "user"], token=STRING, user=ref("User")),
        {"token": "eyJhbGciOiJIUzI1NiJ9...", "user": _USER_EXAMPLE}, (400, 401, 413, 429),
    ),
    ("post", "/api/v1/auth/logout"): (200, SUCCESS, {"success": True}, (401,)),
    ("get", "/api/v1/auth/me"): (200, obj(["user"], user=ref("User")), None, (401,)),
    ("get", "/api/v1/auth/tokens"): (
        200, obj(["tokens"], tokens={"type": "array", "items": ref("ApiToken")}), None, (401,),
    ),
    ("post", "/api/v1/auth/tokens"): (
        201, obj(["token", "secret"], token=ref("ApiToken"), secret=STRING), None,
        (400, 401, 413),
    ),
    ("delete", "/api/v1/auth/tokens/{token_id}"): (200, SUCCESS, None, (401, 404)),
    ("post", "/api/v1/auth/password"): (200, SUCCESS, None, (400, 401, 413)),
    ("post", "/api/v1/control-center/chat"): (200, None, None, (400, 401, 413, 429)),
    ("get", "/api/v1/control-center/chat/{message_id}/events"): (
        200, None, None, (400, 401, 404),
    ),
    ("post", "/api/v1/control-center/chat/{message_id}/stop"): (
        200, SUCCESS, {"success": True}, (401, 404, 409),
    ),
    ("post", "/api/v1/control-center/chat/{message_id}/tool-calls/{tool_call_id}/approve"): (
        200, SUCCESS, {"success": True}, (401, 404, 409),
    ),
    ("post", "/api/v1/control-center/chat/{message_id}/tool-calls/{tool_call_id}/deny"): (
        200, SUCCESS, {"success": True}, (401, 404, 409),
    ),
    ("post", "/api/v1/control-center/ui-chat"): (200, None, None, (400, 401, 413, 429)),
    ("get", "/api/v1/control-center/conversations"): (
        200, obj(["conversations", "nextCursor"],
                 conversations={"type": "array", "items": ref("Conversation")},
                 nextCursor=NULLABLE_STRING),
        None, (400, 401),
    ),
    ("get", "/api/v1/control-center/conversations/{conversation_id}"): (
        200, obj(["conversation"], conversation=ref("Conversation")), None, (401, 404),
    ),
    ("delete", "/api/v1/control-center/conversations/{conversation_id}"): (
        200, SUCCESS, None, (401, 404),
    ),
    ("get", "/api/v1/onboarding"): (
        200, obj(["onboarding"], onboarding={"oneOf": [ref("OnboardingRecord"),
                                                       {"type": "null"}]}),
        None, (401,),
    ),
    ("post", "/api/v1/onboarding"): (
        200, obj(["success", "onboarding"], success={"const": True},
                 onboarding=ref("OnboardingRecord")),
        None, (400, 401, 413, 500),
    ),
    ("get", "/api/v1/admin/settings"): (
        200, obj(["settings"], settings=ref("Settings")), None, (403, 500),
    ),
    ("put", "/api/v1/admin/settings"): (200, SUCCESS, {"success": True}, (400, 403, 413, 500)),
    ("delete", "/api/v1/admin/settings/{name}"): (
        200, SUCCESS, {"success": True}, (403, 404, 500),
    ),
    ("get", "/api/v1/admin/users"): (
        200, obj(["users", "nextCursor"], users={"type": "array", "items": ref("AdminUser")},
                 nextCursor=NULLABLE_STRING),
        {"users": [_ADMIN_USER_EXAMPLE], "nextCursor": None}, (400, 403),
    ),
    ("post", "/api/v1/admin/users"): (
        201, obj(["user"], user=ref("AdminUser"), password=STRING),
        {"user": _ADMIN_USER_EXAMPLE, "password": "f3Qz0rV1m7pX2sKc9LwYb8Tn"},
        (400, 403, 409, 413),
    ),
    ("patch", "/api/v1/admin/users/{user_id}"): (
        200, obj(["user"], user=ref("AdminUser")), None, (400, 403, 404, 409, 413),
    ),
    ("delete", "/api/v1/admin/users/{user_id}"): (200, SUCCESS, None, (403, 404, 409)),
    ("post", "/api/v1/admin/users/{user_id}/password"): (
        200, obj(["success"], success={"const": True}, password=STRING), None,
        (400, 403, 404, 413),
    ),
    ("get", "/api/v1/admin/chat-policy"): (
        200, obj(["policy"], policy=ref("ChatPolicy")), None, (403,),
    ),
    ("put", "/api/v1/admin/chat-policy"): (
        200, obj(["policy"], policy=ref("ChatPolicy")), None, (400, 403, 413),
    ),
    ("get", "/api/v1/admin/usage"): (
        200, obj(["month", "users"], month=STRING,
                 users={"type": "array", "items": ref("UserUsage")}),
        None, (400, 403),
    ),
    ("get", "/healthz"): (200, obj(["status"], status=STRING), {"status": "ok"}, ()),
    ("get", "/readyz"): (200, obj(["status"], status=STRING), {"status": "ok"}, ()),
}  # fmt: skip

_REQUEST_BODIES: dict[tuple[str, str], Schema] = {
    ("post", "/api/v1/auth/login"): ref("LoginRequest"),
    ("post", "/api/v1/control-center/chat"): ref("ChatRequest"),
    ("post", "/api/v1/control-center/ui-chat"): ref("UiChatRequest"),
}
_EXAMPLES: dict[str, Any] = {
    "OnboardingInput": {
        "yearsInBusiness": "12",
        "gciLast12Months": "250000",
        "usingOtherCrm": True,
        "goalsSelected": ["more leads"],
        "brokerageName": "Harbor Commercial",
    },
    "SettingsInput": {"tagOnboardingComplete": "onboarding-complete", "tagHighGCI": "high-gci"},
    "UserCreate": {"email": "new.broker@example.com", "name": "Nia", "role": "user"},
    "UserPatch": {"role": "admin"},
    "TokenCreate": {"label": "laptop"},
}

_SSE_DESCRIPTION = (
    "Server-sent events: each frame is `data: <JSON ChatEvent>` and a blank line. Order: "
    "`message_start`, then `content_delta`, `tool_call_start` and `tool_result` events, then "
    "`message_complete`; after an `error` event nothing follows. Errors found before the "
    "stream starts are plain JSON answers (400, 401). With `?ids=1` (and always on the "
    "events endpoint) each frame also has an `id: <messageId>:<n>` line (CONTRACT 11)."
)
_SSE_EXAMPLE = (
    'data: {"type":"message_start","conversationId":"c1","messageId":"msg_1763888400000_a1b2c3d4e"}'
    '\n\ndata: {"type":"content_delta","delta":"You added 3 contacts."}\n\n'
    'data: {"type":"message_complete","message":{"id":"msg_1763888400000_a1b2c3d4e",'
    '"role":"assistant","content":"You added 3 contacts.","createdAt":"2026-11-23T09:00:00.000Z"}}'
    "\n\n"
)


def _sse_event(name: str) -> Schema:
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": ref(name),
            }
        },
    }


_SSE_EVENT = _sse_event("ChatEvent")
# The UI message stream ends with the frame `data: [DONE]`, which is not JSON.
_UI_SSE_EVENT: Schema = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {"anyOf": [{"const": "[DONE]"}, _sse_event("UiMessageChunk")["properties"]["data"]]}
    },
}


def _lift_body_schema(operation: Schema, schemas: dict[str, Schema]) -> None:
    """A pydantic body schema inlined by `http.json_body` becomes a named component."""
    content = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if not content or "$ref" in content["schema"]:
        return
    schema = content["schema"]
    name = schema.get("title")
    if not name:
        return
    for field in schema.get("properties", {}).values():
        if field.get("default", ...) is None:
            del field["default"]  # "absent", not a null value
    if name in _EXAMPLES:
        schema["example"] = _EXAMPLES[name]
    schemas[name] = schema
    content["schema"] = ref(name)


def _complete(path: str, method: str, operation: Schema, schemas: dict[str, Schema]) -> None:
    responses: Schema = operation.setdefault("responses", {})
    responses.pop("422", None)  # we answer 400, never FastAPI's 422
    if (method, path) in _REQUEST_BODIES:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _REQUEST_BODIES[(method, path)]}},
        }
    _lift_body_schema(operation, schemas)
    spec = _OPS.get((method, path))
    if spec is None:
        return
    status, schema, example, refusals = spec
    if path == "/api/v1/control-center/ui-chat":
        responses["200"] = {
            "description": "The Vercel AI SDK's UI message stream (`docs/chat.md`).",
            "content": {"text/event-stream": {"schema": _UI_SSE_EVENT}},
        }
    elif schema is None:  # the chat's event streams
        responses["200"] = {
            "description": _SSE_DESCRIPTION,
            "content": {
                "text/event-stream": {
                    # Before OpenAPI 3.2, an event stream's `schema` describes one event: its
                    # `data` line holds a JSON ChatEvent (what 3.2 calls its `itemSchema`).
                    "schema": _SSE_EVENT,
                    "example": _SSE_EXAMPLE,
                }
            },
        }
    else:
        assert schema is not None
        responses.pop("200", None)
        responses[str(status)] = {"description": "Success", "content": _json(schema, example)}
    # Any cookie-authenticated write may meet the cross-origin refusal (CONTRACT 9).
    unsafe = (403,) if method in {"post", "put", "patch", "delete"} else ()
    for code in sorted({*refusals, *unsafe}):
        responses[str(code)] = {
            "description": _STATUS_TEXT[code],
            "content": _json(ref("Error")),
        }
    if path.startswith("/api/v1/") and path != "/api/v1/auth/login":
        operation["security"] = SESSION_SECURITY


def complete(schema: Schema) -> Schema:
    """Add what FastAPI cannot see to a freshly generated description (in place)."""
    components = schema.setdefault("components", {})
    schemas: dict[str, Schema] = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas.update(SCHEMAS)
    components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            _complete(path, method, operation, schemas)
    schema["info"]["description"] = (
        "Dashboard API index, CRM chat assistant, onboarding, settings and accounts. "
        "Errors are `{error, details?}`; every answer carries `X-Request-ID`."
    )
    return schema


def install(app: FastAPI) -> None:
    """Complete /openapi.json when it is first built (call after other openapi wrappers)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        first = app.openapi_schema is None
        built = build()
        if first:
            complete(built)
        return built

    app.openapi = openapi  # type: ignore[method-assign]


def operation_id(route: Any) -> str:
    """`list_users` → `listUsers`: short, stable names for generated clients."""
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), route.name)
