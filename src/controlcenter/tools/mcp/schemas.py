"""The bodies and answers of /api/v1/admin/mcp-servers (docs/reference.md).

Strict and closed like the other admin bodies: an unknown key is refused.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from controlcenter.admin_settings.names import is_mask
from controlcenter.admin_settings.usable import credential_problem, url_problem
from controlcenter.common.secrets import MASK
from controlcenter.web.openapi_doc import schema_extra
from controlcenter.web.validation import StoredStr

# A header name is an HTTP token; these are the transport's own and cannot be set.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
RESERVED_HEADERS = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "transfer-encoding",
    }
)
MAX_HEADERS = 20
MAX_CREDENTIAL = 4000


def _url(value: str) -> str:
    if url_problem(value) is not None:
        raise PydanticCustomError("url", "must be an http:// or https:// URL")
    return value


def _name(value: str) -> str:
    if value != value.strip() or not value:
        raise PydanticCustomError("name", "must be 1-100 characters without surrounding spaces")
    return value


def _credential(value: str) -> str:
    if is_mask(value):
        return value  # what GET shows: it keeps the stored value
    if credential_problem(value) is not None:
        raise PydanticCustomError("credential", "must be printable ASCII")
    return value


def _client_id(value: str) -> str:
    if credential_problem(value) is not None:
        raise PydanticCustomError("credential", "must be printable ASCII")
    return value


def _issuer(value: str) -> str:
    return _url(value) if value else value


def _headers(value: dict[str, str]) -> dict[str, str]:
    seen: set[str] = set()
    for name in value:
        if not HEADER_NAME.fullmatch(name):
            raise PydanticCustomError("header_name", "{name} is not a header name", {"name": name})
        if name.lower() in RESERVED_HEADERS:
            raise PydanticCustomError(
                "header_name", "{name} is set by the MCP transport itself", {"name": name}
            )
        if name.lower() in seen:
            raise PydanticCustomError("header_name", "{name} is given twice", {"name": name})
        seen.add(name.lower())
    return value


# The rules above as JSON Schema patterns, for the interface description (they exclude NUL, as
# every body's strings do). The URL's pattern names the ASCII form (a name, an IPv4 address,
# a port, a path); the description the rest the service also takes (printable Unicode).
_EDGE = "[^\\s\\u0000-\\u0020\\u007f-\\u00a0]"  # no space, control or NUL
_NAME_PATTERN = f"^{_EDGE}([^\\u0000]*{_EDGE})?$"
_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://[A-Za-z0-9._~%!$&'()*+,;=-]+(:[0-9]{0,5})?([/?#][!-~]*)?$"
_NEW_CREDENTIAL_PATTERN = "^[ -~]*$"
_SENT_VALUE_PATTERN = "^[ -~]+$"  # a value sent, not empty nor the masked form
_CREDENTIAL_PATTERN = f"^([ -~]*|{MASK}(.{{4}})?)$"

ServerName = Annotated[
    StoredStr,
    Field(
        max_length=100,
        json_schema_extra={"pattern": _NAME_PATTERN},
        description="1-100 characters without surrounding spaces",
    ),
    AfterValidator(_name),
]
ServerUrl = Annotated[
    StoredStr,
    Field(
        max_length=2000,
        json_schema_extra={"pattern": _URL_PATTERN},
        description="an http:// or https:// URL with a host, of printable characters",
    ),
    AfterValidator(_url),
]


def _credential_field(pattern: str, description: str) -> Any:
    return Field(
        max_length=MAX_CREDENTIAL, json_schema_extra={"pattern": pattern}, description=description
    )


_HEADERS_FIELD = Field(
    max_length=MAX_HEADERS,
    json_schema_extra={"propertyNames": {"pattern": HEADER_NAME.pattern}},
    description="header names are HTTP tokens, each at most once (case-insensitively); "
    f"the transport's own are refused: {', '.join(sorted(RESERVED_HEADERS))}",
)

# A new server has no stored value for a masked one to keep.
NewCredential = Annotated[
    StoredStr,
    _credential_field(_NEW_CREDENTIAL_PATTERN, "printable ASCII"),
    AfterValidator(_credential),
]
Credential = Annotated[
    StoredStr,
    _credential_field(
        _CREDENTIAL_PATTERN,
        f"printable ASCII, or the masked form GET shows (`{MASK}`, or `{MASK}` and 4 "
        "characters), which keeps the stored value",
    ),
    AfterValidator(_credential),
]
OAuthClientId = Annotated[
    StoredStr,
    _credential_field(_NEW_CREDENTIAL_PATTERN, 'printable ASCII; "" removes the credentials'),
    AfterValidator(_client_id),
]
OAuthIssuer = Annotated[
    StoredStr,
    Field(
        max_length=2000,
        json_schema_extra={"pattern": f"^({_URL_PATTERN[1:-1]})?$"},
        description='the authorization server\'s issuer URL (http:// or https://); "": the one '
        "the MCP server names",
    ),
    AfterValidator(_issuer),
]
NewHeaders = Annotated[dict[str, NewCredential], _HEADERS_FIELD, AfterValidator(_headers)]
Headers = Annotated[dict[str, Credential], _HEADERS_FIELD, AfterValidator(_headers)]

EXAMPLE_INPUT = {
    "name": "HighLevel",
    "url": "https://services.leadconnectorhq.com/mcp/",
    "bearerToken": "pit-0f6c2a57-9d1e-4a9b-8c3e-12ab34cd56ef",
    "headers": {"locationId": "{crmLocationId}"},
}


def _given(*names: str, value: JsonDict | None = None) -> JsonDict:
    """JSON Schema: each of `names` is sent and not empty (or matches `value`)."""
    each = value or {"minLength": 1}
    return {"required": list(names), "properties": {n: each for n in names}}


# A server has either a bearer token or OAuth client credentials; a client secret or an issuer
# goes with a client id (a new server's client id with a secret).
_EITHER: JsonDict = {"not": _given("bearerToken", "oauthClientId")}
CREATE_RULES: JsonDict = {
    "allOf": [
        _EITHER,
        {
            "if": _given("oauthClientId"),
            "then": _given("oauthClientSecret"),
            "else": {"not": {"anyOf": [_given("oauthClientSecret"), _given("oauthIssuer")]}},
        },
    ]
}
# A change is judged with what is stored; these it refuses whatever is stored: a bearer token
# with a client id, a new secret or an issuer beside the client id "" that removes them.
PATCH_RULES: JsonDict = {
    "allOf": [
        _EITHER,
        {
            "not": {
                "required": ["oauthClientId"],
                "properties": {"oauthClientId": {"maxLength": 0}},
                "anyOf": [
                    _given("oauthClientSecret", value={"pattern": _SENT_VALUE_PATTERN}),
                    _given("oauthIssuer"),
                ],
            }
        },
    ]
}


class McpServerCreate(BaseModel):
    """A new server. `headers` values may use `{crmLocationId}` (the broker's CRM location).
    A server that requires OAuth gets `oauthClientId` and `oauthClientSecret` (and optionally
    `oauthIssuer`) instead of a `bearerToken`: both at once are refused."""

    model_config = schema_extra(EXAMPLE_INPUT, rules=CREATE_RULES, strict=True, extra="forbid")
    name: ServerName
    url: ServerUrl
    enabled: bool = True
    bearerToken: NewCredential = ""
    headers: NewHeaders = Field(default_factory=dict)
    oauthClientId: OAuthClientId = ""
    oauthClientSecret: NewCredential = ""
    oauthIssuer: OAuthIssuer = ""


class McpServerPatch(BaseModel):
    """Only the fields sent change. A masked `bearerToken`, `oauthClientSecret` or header value
    (as GET shows it) keeps the stored one; `bearerToken: ""` removes the token,
    `oauthClientId: ""` the OAuth client credentials; `headers` replaces the set."""

    model_config = schema_extra({"enabled": False}, rules=PATCH_RULES, strict=True, extra="forbid")
    name: ServerName = None  # type: ignore[assignment]  # absent is fine, null is not
    url: ServerUrl = None  # type: ignore[assignment]
    enabled: bool = None  # type: ignore[assignment]
    bearerToken: Credential = None  # type: ignore[assignment]
    headers: Headers = None  # type: ignore[assignment]
    oauthClientId: OAuthClientId = None  # type: ignore[assignment]
    oauthClientSecret: Credential = None  # type: ignore[assignment]
    oauthIssuer: OAuthIssuer = None  # type: ignore[assignment]


# The answers, for the interface description.

SERVER_EXAMPLE: dict[str, Any] = {
    "id": "5f0c7a52-3b1d-4a8e-9c1e-2d7b9a0f4e61",
    "name": "HighLevel",
    "url": "https://services.leadconnectorhq.com/mcp/",
    "enabled": True,
    "bearerToken": "••••56ef",
    "headers": {"locationId": "{crmLocationId}"},
    "oauthClientId": "",
    "oauthClientSecret": "",
    "oauthIssuer": "",
    "createdAt": "2026-11-27T09:00:00.000Z",
    "updatedAt": "2026-11-27T09:00:00.000Z",
}


class McpServerView(BaseModel):
    model_config = ConfigDict(title="McpServer")
    id: str
    name: str
    url: str
    enabled: bool
    bearerToken: str
    headers: dict[str, str]
    oauthClientId: str
    oauthClientSecret: str
    oauthIssuer: str
    createdAt: str
    updatedAt: str


class McpServerAnswer(BaseModel):
    server: McpServerView


class McpServerList(BaseModel):
    servers: list[McpServerView]


class McpServerState(BaseModel):
    name: str
    state: str = Field(description="`working`, `failing` or `disabled`")
    toolCount: int
    ok: bool
    detail: str


class McpServerStates(BaseModel):
    servers: list[McpServerState]
