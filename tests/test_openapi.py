"""/openapi.json is a valid OpenAPI 3.1 document that a generated client can rely on: every
operation has its request body, its answers with schemas, its security; a client driven only
by the document signs in, saves onboarding and settings, and every answer matches the
document. /docs and /redoc load nothing from another host."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi.openapi.utils import get_openapi
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from tests.conftest import RunningServer, UserFactory

STATE_CHANGING = {"post", "put", "patch"}
NO_BODY = {
    ("post", "/api/v1/auth/logout"),
    ("post", "/api/v1/control-center/chat/{message_id}/stop"),
    ("post", "/api/v1/control-center/chat/{message_id}/tool-calls/{tool_call_id}/approve"),
    ("post", "/api/v1/control-center/chat/{message_id}/tool-calls/{tool_call_id}/deny"),
    ("post", "/api/v1/admin/integrations/{name}/test"),
    ("post", "/api/v1/control-center/activity/{entry_id}/undo"),
}
# The service's own 422 (never FastAPI's validation answer): an undo with no known inverse.
OWN_422 = {("post", "/api/v1/control-center/activity/{entry_id}/undo")}


def resolved(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a `$ref` points to (its siblings kept), or the schema itself."""
    if "$ref" not in schema:
        return schema
    named = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return {**{k: v for k, v in schema.items() if k != "$ref"}, **named}


@pytest.fixture
async def spec(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


async def test_the_document_is_valid_openapi(spec: dict[str, Any]) -> None:
    validate(spec)
    assert spec["openapi"].startswith("3.1")


async def test_the_document_is_fastapis_own(server: RunningServer, spec: dict[str, Any]) -> None:
    """What /openapi.json serves is what FastAPI builds from the routes, with one addition: the
    index's basic scheme among the components (the index declares its schemes in its operation
    and reads the credentials itself, so no route dependency puts it there)."""
    app = server.app
    built = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        description=app.description,
        routes=app.routes,
        separate_input_output_schemas=app.separate_input_output_schemas,
    )
    schemes = spec["components"]["securitySchemes"]
    assert schemes.pop("basic_auth") == {
        "type": "http",
        "scheme": "basic",
        "description": "E-mail with the password or an API token",
    }
    assert built == spec
    assert "HTTPValidationError" not in spec["components"]["schemas"]


async def test_every_operation_is_complete(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert {"bearer_auth", "basic_auth", "cookie_auth"} <= set(schemes)
    ids = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            ids.append(operation["operationId"])
            responses = operation["responses"]
            assert "422" not in responses or (method, path) in OWN_422, where
            success = [code for code in responses if code.startswith("2")]
            assert success, where
            for code, answer in responses.items():
                assert answer.get("content"), (where, code)
                for media in answer["content"].values():
                    assert "schema" in media, (where, code)
            if method in STATE_CHANGING and (method, path) not in NO_BODY:
                assert "requestBody" in operation, where
                body = operation["requestBody"]["content"]["application/json"]["schema"]
                assert body.get("$ref") or body.get("properties"), where
            if method in STATE_CHANGING and (method, path) not in NO_BODY:
                assert "400" in responses, where
            if path.startswith("/api/v1/") and path != "/api/v1/auth/login":
                assert operation.get("security"), where
                assert "401" in responses or "403" in responses, where
            if "{" in path and path.startswith("/api/"):
                assert "404" in responses, where
            for answer in responses.values():
                for media in answer["content"].values():
                    for pointer in re.findall(r"#/components/schemas/(\w+)", str(media)):
                        assert pointer in spec["components"]["schemas"], (where, pointer)
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z-]*", i) for i in ids), ids
    chat = spec["paths"]["/api/v1/control-center/chat"]["post"]
    stream = chat["responses"]["200"]["content"]["text/event-stream"]
    # One event: its `data` line is a JSON ChatEvent (OpenAPI 3.1 reads `schema` per event).
    data = resolved(spec, stream["schema"])["properties"]["data"]
    assert data["contentSchema"] == {"$ref": "#/components/schemas/ChatEvent"}
    event_types = {
        resolved(spec, variant)["properties"]["type"]["const"]
        for variant in spec["components"]["schemas"]["ChatEvent"]["oneOf"]
    }
    assert event_types == {
        "message_start", "content_delta", "tool_call_start", "tool_result",
        "message_complete", "error",
        "tool_approval_required", "provider_fallback",  # the chat controls' events
    }  # fmt: skip


class SpecClient:
    """A client that knows only the document: operations by id, bodies and answers checked
    against the document's schemas."""

    def __init__(self, spec: dict[str, Any], http: httpx.AsyncClient) -> None:
        self.spec = spec
        self.http = http
        self.token: str | None = None
        self.operations = {
            operation["operationId"]: (method, path, operation)
            for path, operations in spec["paths"].items()
            for method, operation in operations.items()
        }

    def _validator(self, schema: dict[str, Any]) -> Draft202012Validator:
        # The document's components beside the schema, so that its $refs resolve.
        return Draft202012Validator({**schema, "components": self.spec["components"]})

    def example(self, operation_id: str) -> Any:
        _, _, operation = self.operations[operation_id]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        return resolved(self.spec, schema)["example"]

    async def call(self, operation_id: str, body: Any = None, **params: str) -> httpx.Response:
        method, path, operation = self.operations[operation_id]
        if body is not None:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            self._validator(schema).validate(body)  # the client sends what the document says
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        response = await self.http.request(
            method.upper(), path.format(**params), json=body, headers=headers
        )
        answers = operation["responses"]
        assert str(response.status_code) in answers, (operation_id, response.status_code)
        content = answers[str(response.status_code)]["content"]
        media = response.headers["content-type"].split(";")[0]
        self._validator(content[media]["schema"]).validate(response.json())
        return response


async def test_a_client_driven_by_the_document(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory, spec: dict[str, Any]
) -> None:
    boss = await users.create("super_admin")
    broker = await users.create("user")
    api = SpecClient(spec, client)

    refused = await api.call("login", {"email": broker.email, "password": "wrong password"})
    assert refused.status_code == 401
    example = api.example("login")
    assert set(example) == {"email", "password"}
    signed_in = await api.call("login", {"email": broker.email, "password": broker.password})
    api.token = signed_in.json()["token"]

    assert (await api.call("getOnboarding")).json() == {"onboarding": None}
    saved = await api.call("saveOnboarding", api.example("saveOnboarding"))
    assert saved.json()["onboarding"]["yearsInBusiness"] == "12"
    invalid = await client.post(
        "/api/v1/onboarding", json={"usingOtherCrm": "yes"},
        headers={"Authorization": f"Bearer {api.token}"},
    )  # fmt: skip
    api._validator(
        spec["paths"]["/api/v1/onboarding"]["post"]["responses"]["400"]["content"][
            "application/json"]["schema"]
    ).validate(invalid.json())  # fmt: skip
    assert (await api.call("getSettings")).status_code == 403

    api.token = None
    boss_session = await api.call("login", {"email": boss.email, "password": boss.password})
    api.token = boss_session.json()["token"]
    assert (await api.call("putSettings", api.example("putSettings"))).json() == {"success": True}
    settings = (await api.call("getSettings")).json()["settings"]
    assert settings["tagHighGCI"] == "high-gci"
    made = await api.call("createUser", api.example("createUser"))
    assert made.status_code == 201
    duplicate = await api.call("createUser", api.example("createUser"))
    assert duplicate.status_code == 409
    await api.call("listUsers")
    await api.call("me")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_pages_load_their_assets_from_the_service(
    client: httpx.AsyncClient, page: str
) -> None:
    html = (await client.get(page)).text
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources
    for source in sources:
        assert source.startswith("/docs-assets/"), source
        asset = await client.get(source)
        assert asset.status_code == 200 and len(asset.content) > 500, source
    assert "cdn." not in html and "fonts.googleapis" not in html
    missing = await client.get("/docs-assets/nope.js")
    assert missing.status_code == 404


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_pages_carry_a_policy_of_their_own_assets(
    client: httpx.AsyncClient, page: str
) -> None:
    response = await client.get(page)
    directives = dict(
        part.strip().split(" ", 1)
        for part in response.headers["content-security-policy"].split(";")
    )
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    script_sources = directives["script-src"].split()
    assert script_sources[0] == "'self'"
    assert all(source.startswith("'sha256-") for source in script_sources[1:])
    assert len(script_sources) == 1 + response.text.count("<script>")
    assert "unsafe-eval" not in directives["script-src"]
    assert "unsafe-inline" not in directives["script-src"]
    assert "http" not in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    asset = await client.get(re.findall(r'src="([^"]+)"', response.text)[0])
    assert asset.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "Echo\r\nX-Injected: 1"},
        {"url": "http://user:pa55w0rd@example.com/mcp"},
        *({"headers": {name: "v"}} for name in ("Cookie", "proxy-authorization", "TE", "Upgrade")),
        {"headers": {"X-Key": " padded"}},
        {"bearerToken": "pit-1234567890 "},
        {"bearerToken": "", "oauthClientId": "id", "oauthClientSecret": "s-1"},  # no issuer
    ],
)
async def test_the_document_states_the_mcp_server_rules(
    spec: dict[str, Any], changes: dict[str, Any]
) -> None:
    """What the API refuses in a new MCP server, the document's schema refuses too."""
    create = spec["paths"]["/api/v1/admin/mcp-servers"]["post"]
    schema = resolved(spec, create["requestBody"]["content"]["application/json"]["schema"])
    validator = Draft202012Validator({**schema, "components": spec["components"]})
    good = {
        "name": "Echo",
        "url": "https://mcp.example.com/mcp",
        "bearerToken": "pit-1234567890",
        "headers": {"X-Key": "v-1"},
    }
    assert validator.is_valid(good)
    oauth = {"bearerToken": "", "oauthClientId": "id", "oauthClientSecret": "s-1"}
    assert validator.is_valid(good | oauth | {"oauthIssuer": "https://auth.example.com"})
    assert not validator.is_valid(good | changes), changes
