"""The bodies and answers of /api/v1/admin/mcp-servers (docs/reference.md).

Strict and closed like the other admin bodies: an unknown key is refused.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from controlcenter.admin_settings.names import is_mask
from controlcenter.admin_settings.usable import credential_problem, url_problem
from controlcenter.common.secrets import MASK
from controlcenter.web.openapi_doc import schema_extra
from controlcenter.web.validation import StoredStr

# A header name is an HTTP token. Refused: the transport's own, the hop-by-hop ones (they
# concern one connection, not the server: RFC 9110 section 7.6.1) and those that carry
# another party's credentials.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
TRANSPORT_HEADERS = frozenset(
    {
        "accept",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
    }
)
HOP_BY_HOP_HEADERS = frozenset(
    {
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
OTHERS_CREDENTIAL_HEADERS = frozenset({"cookie", "proxy-authorization"})
REFUSED_HEADERS: dict[str, str] = {
    **{name: "is set by the MCP transport itself" for name in TRANSPORT_HEADERS},
    **{name: "is a hop-by-hop header" for name in HOP_BY_HOP_HEADERS},
    **{name: "carries another party's credentials" for name in OTHERS_CREDENTIAL_HEADERS},
}
MAX_HEADERS = 20
MAX_CREDENTIAL = 4000


def _url(value: str) -> str:
    if url_problem(value) is not None:
        raise PydanticCustomError("url", "must be an http:// or https:// URL")
    if "@" in urlsplit(value).netloc:
        raise PydanticCustomError(
            "url", "must not carry a user name or password: use bearerToken or a header"
        )
    return value


# Control characters (C0, DEL, C1) and line or paragraph breaks: what would split a log line or
# a header. The interface description's pattern states the same set.
_CONTROL = re.compile("[\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]")


def _name(value: str) -> str:
    if value != value.strip() or not value or _CONTROL.search(value):
        raise PydanticCustomError(
            "name", "must be 1-100 characters without surrounding spaces or control characters"
        )
    return value


def _credential(value: str) -> str:
    if is_mask(value):
        return value  # what GET shows: it keeps the stored value
    if credential_problem(value) is not None:
        raise PydanticCustomError("credential", "must be printable ASCII")
    return value


def _header_value(value: str) -> str:
    """A credential sent as a header value: HTTP drops the white space around a field value,
    so a value that has some is refused rather than sent as something else."""
    value = _credential(value)
    if value != value.strip(" \t"):
        raise PydanticCustomError(
            "credential", "must be printable ASCII without leading or trailing white space"
        )
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
        refused = REFUSED_HEADERS.get(name.lower())
        if refused is not None:
            raise PydanticCustomError("header_name", "{name} {why}", {"name": name, "why": refused})
        if name.lower() in seen:
            raise PydanticCustomError("header_name", "{name} is given twice", {"name": name})
        seen.add(name.lower())
    return value


# The rules above as JSON Schema patterns, for the interface description (they exclude NUL, as
# every body's strings do). The URL's pattern names the ASCII form (a name, an IPv4 address,
# a port, a path); the description the rest the service also takes (printable Unicode).
_EDGE = "[^\\s\\u0000-\\u0020\\u007f-\\u00a0]"  # no space, control or NUL
_INNER = "[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]"  # no control or line break
_NAME_PATTERN = f"^{_EDGE}({_INNER}*{_EDGE})?$"
_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://[A-Za-z0-9._~%!$&'()*+,;=-]+(:[0-9]{0,5})?([/?#][!-~]*)?$"
_NEW_CREDENTIAL_PATTERN = "^[ -~]*$"
_NEW_HEADER_VALUE_PATTERN = "^([!-~]([ -~]*[!-~])?)?$"  # no white space around it
_SENT_VALUE_PATTERN = "^[ -~]+$"  # a value sent, not empty nor the masked form
_CREDENTIAL_PATTERN = f"^([ -~]*|{MASK}(.{{4}})?)$"
_HEADER_VALUE_PATTERN = f"^(([!-~]([ -~]*[!-~])?)?|{MASK}(.{{4}})?)$"

ServerName = Annotated[
    StoredStr,
    Field(
        max_length=100,
        json_schema_extra={"pattern": _NAME_PATTERN},
        description="1-100 characters without surrounding spaces, without control characters "
        "(U+0000-U+001F, U+007F-U+009F) or line breaks (U+2028, U+2029)",
    ),
    AfterValidator(_name),
]
ServerUrl = Annotated[
    StoredStr,
    Field(
        max_length=2000,
        json_schema_extra={"pattern": _URL_PATTERN},
        description="an http:// or https:// URL with a host, of printable characters, without "
        "a user name or password (`user:password@`)",
    ),
    AfterValidator(_url),
]


def _credential_field(pattern: str, description: str) -> Any:
    return Field(
        max_length=MAX_CREDENTIAL, json_schema_extra={"pattern": pattern}, description=description
    )


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


# The token rule, with the refused names (in any case) excluded.
_HEADER_NAME_PATTERN = (
    "^(?!(?:"
    + "|".join(_any_case(name) for name in sorted(REFUSED_HEADERS))
    + ")$)"
    + HEADER_NAME.pattern[1:]
)
_HEADERS_FIELD = Field(
    max_length=MAX_HEADERS,
    json_schema_extra={"propertyNames": {"pattern": _HEADER_NAME_PATTERN}},
    description="header names are HTTP tokens, each at most once (case-insensitively). "
    f"Refused: the transport's own ({', '.join(sorted(TRANSPORT_HEADERS))}), the hop-by-hop "
    f"ones ({', '.join(sorted(HOP_BY_HOP_HEADERS))}) and those carrying another party's "
    f"credentials ({', '.join(sorted(OTHERS_CREDENTIAL_HEADERS))}). A value is printable "
    "ASCII without leading or trailing white space",
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
# A bearer token or a header value: sent in a header, so no white space around it.
NewHeaderValue = Annotated[
    StoredStr,
    _credential_field(
        _NEW_HEADER_VALUE_PATTERN, "printable ASCII without leading or trailing white space"
    ),
    AfterValidator(_header_value),
]
HeaderValue = Annotated[
    StoredStr,
    _credential_field(
        _HEADER_VALUE_PATTERN,
        "printable ASCII without leading or trailing white space, or the masked form GET "
        f"shows (`{MASK}`, or `{MASK}` and 4 characters), which keeps the stored value",
    ),
    AfterValidator(_header_value),
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
        description="the authorization server's issuer URL (http:// or https://): the client "
        "secret is only ever sent to its token endpoint. Required with `oauthClientId`; a "
        'server stored without one keeps working until its OAuth credentials change ("": '
        "the one the MCP server names)",
    ),
    AfterValidator(_issuer),
]
NewHeaders = Annotated[dict[str, NewHeaderValue], _HEADERS_FIELD, AfterValidator(_headers)]
Headers = Annotated[dict[str, HeaderValue], _HEADERS_FIELD, AfterValidator(_headers)]

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
            "then": _given("oauthClientSecret", "oauthIssuer"),
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
    A server that requires OAuth gets `oauthClientId`, `oauthClientSecret` and `oauthIssuer`
    instead of a `bearerToken`: both at once are refused."""

    model_config = schema_extra(EXAMPLE_INPUT, rules=CREATE_RULES, strict=True, extra="forbid")
    name: ServerName
    url: ServerUrl
    enabled: bool = True
    bearerToken: NewHeaderValue = ""
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
    bearerToken: HeaderValue = None  # type: ignore[assignment]
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
    warning: str = Field(
        description='what the operator should change although the server works ("": nothing)'
    )


class McpServerStates(BaseModel):
    servers: list[McpServerState]
