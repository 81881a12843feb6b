"""The OCS dashboard index: its credentials, the `OCS-APIRequest` header, JSON and XML answers."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET

import httpx
import pytest
from sqlalchemy.orm import Session

from tests.conftest import AppUser, RunningServer, UserFactory

PATH = "/ocs/v2.php/apps/dashboard/api"
OCS = {"OCS-APIRequest": "true"}
UNAUTHORISED = (
    b'{"ocs":{"meta":{"status":"failure","statuscode":997,'
    b'"message":"Current user is not logged in"},"data":[]}}'
)


def basic(user: str, secret: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_ok(response: httpx.Response) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["ocs"]["meta"] == {"status": "ok", "statuscode": 200, "message": "OK"}
    assert set(body["ocs"]["data"]) == {"message"}
    message = body["ocs"]["data"]["message"]
    assert isinstance(message, str) and message.strip()


def assert_unauthorised(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/json")
    assert response.content == UNAUTHORISED


def credentials(user: AppUser) -> dict[str, dict[str, str]]:
    return {
        "basic password": basic(user.email, user.password),
        "basic api token": basic(user.email, user.api_token),
        "bearer session": bearer(user.token),
        "bearer api token": bearer(user.api_token),
    }


async def test_every_credential_kind_gets_the_message(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for headers in credentials(user).values():
        response = await client.get(PATH, headers={**headers, **OCS})
        assert_ok(response)


@pytest.mark.parametrize("role", ["user", "admin", "super_admin"])
async def test_every_role_may_call_it(
    client: httpx.AsyncClient, users: UserFactory, role: str
) -> None:
    user = await users.create(role)
    assert_ok(await client.get(PATH, headers={**bearer(user.token), **OCS}))


async def test_format_json_is_accepted(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    response = await client.get(
        PATH, params={"format": "json"}, headers={**bearer(user.api_token), **OCS}
    )
    assert_ok(response)


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE"])
async def test_header_true_in_any_case(
    client: httpx.AsyncClient, users: UserFactory, value: str
) -> None:
    user = await users.create()
    response = await client.get(PATH, headers={**bearer(user.token), "ocs-apirequest": value})
    assert_ok(response)


@pytest.mark.parametrize("value", [None, "false", "1", "yes", "", "truee"])
async def test_header_missing_or_not_true_is_412(
    client: httpx.AsyncClient, users: UserFactory, value: str | None
) -> None:
    user = await users.create()
    headers = bearer(user.token)
    if value is not None:
        headers["OCS-APIRequest"] = value
    response = await client.get(PATH, headers=headers)
    assert response.status_code == 412
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"message": "CSRF check failed"}


async def test_no_credentials_is_401_even_with_header(client: httpx.AsyncClient) -> None:
    assert_unauthorised(await client.get(PATH, headers=OCS))


async def test_credentials_are_checked_before_the_header(client: httpx.AsyncClient) -> None:
    assert_unauthorised(await client.get(PATH))
    assert_unauthorised(await client.get(PATH, headers=bearer("nope")))


async def test_bad_credentials_are_401(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    other = await users.create()
    for headers in (
        basic(user.email, "wrong password"),
        basic("nobody@example.com", user.password),
        basic(user.email, other.api_token),  # someone else's token
        basic(other.email, user.password),
        basic(user.email, user.token),  # a session JWT is not a basic secret
        bearer(user.api_token + "x"),
        bearer(user.token[:-2] + ("AA" if not user.token.endswith("AA") else "BB")),
        bearer(user.password),
        {"Authorization": "Basic !!!not-base64!!!"},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:x").decode()},
        {"Authorization": "Basic"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Token {user.api_token}"},
    ):
        assert_unauthorised(await client.get(PATH, headers={**headers, **OCS}))


async def test_basic_email_is_case_insensitive(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get(PATH, headers={**basic(user.email.upper(), user.api_token), **OCS})
    assert_ok(response)


async def test_non_ascii_password_in_basic(
    client: httpx.AsyncClient, users: UserFactory, server: RunningServer
) -> None:
    from controlcenter.auth.passwords import hash_password_off_loop
    from controlcenter.auth.service import create_user

    password_hash = await hash_password_off_loop("pässwörd-€")
    await server.db.run_write(create_user, email="ümlaut@example.com", password_hash=password_hash)
    assert_ok(await client.get(PATH, headers={**basic("ümlaut@example.com", "pässwörd-€"), **OCS}))


async def test_session_cookie_with_header_is_accepted(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url, cookies={"session": user.token}) as http:
        assert_ok(await http.get(PATH, headers=OCS))
        # The header is the CSRF protection a browser session needs.
        response = await http.get(PATH)
        assert (response.status_code, response.json()) == (412, {"message": "CSRF check failed"})
        # A present Authorization header decides on its own.
        assert_unauthorised(await http.get(PATH, headers={**bearer("wrong"), **OCS}))


async def test_api_token_in_cookie_is_not_a_session(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url, cookies={"session": user.api_token}) as http:
        assert_unauthorised(await http.get(PATH, headers=OCS))


async def test_logged_out_session_is_refused(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    assert (await client.post("/api/v1/auth/logout", headers=bearer(user.token))).status_code == 200
    assert_unauthorised(await client.get(PATH, headers={**bearer(user.token), **OCS}))
    # The API token is not a session: it keeps working.
    assert_ok(await client.get(PATH, headers={**bearer(user.api_token), **OCS}))


@pytest.mark.parametrize("app_id", ["other", "Dashboard", "dashboard2"])
async def test_another_app_id_is_404_envelope(
    client: httpx.AsyncClient, users: UserFactory, app_id: str
) -> None:
    user = await users.create()
    for headers in ({**bearer(user.token), **OCS}, {}):
        response = await client.get(f"/ocs/v2.php/apps/{app_id}/api", headers=headers)
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert body["ocs"]["meta"]["status"] == "failure"
        assert body["ocs"]["meta"]["statuscode"] == 404
        assert body["ocs"]["meta"]["message"]
        assert body["ocs"]["data"] == []


def parse_xml(response: httpx.Response) -> ET.Element:
    assert response.headers["content-type"].startswith("application/xml")
    assert response.text.startswith('<?xml version="1.0"?>\n<ocs>\n <meta>\n')
    return ET.fromstring(response.content)  # noqa: S314 - our own server's answer


async def test_xml_on_request(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    headers = {**bearer(user.token), **OCS}
    by_query = await client.get(PATH, params={"format": "xml"}, headers=headers)
    by_accept = await client.get(PATH, headers={**headers, "Accept": "application/xml"})
    json_message = (await client.get(PATH, headers=headers)).json()["ocs"]["data"]["message"]
    for response in (by_query, by_accept):
        assert response.status_code == 200
        root = parse_xml(response)
        assert root.tag == "ocs"
        assert [child.tag for child in root] == ["meta", "data"]
        assert root.findtext("meta/status") == "ok"
        assert root.findtext("meta/statuscode") == "200"
        assert root.findtext("meta/message") == "OK"
        assert root.findtext("data/message") == json_message
    # ?format wins over Accept, in both directions.
    response = await client.get(
        PATH, params={"format": "json"}, headers={**headers, "Accept": "application/xml"}
    )
    assert_ok(response)
    response = await client.get(
        PATH, params={"format": "xml"}, headers={**headers, "Accept": "application/json"}
    )
    assert parse_xml(response).findtext("meta/status") == "ok"


async def test_xml_401_and_404_are_nextclouds_form(client: httpx.AsyncClient) -> None:
    response = await client.get(PATH, params={"format": "xml"}, headers=OCS)
    assert response.status_code == 401
    assert response.text == (
        '<?xml version="1.0"?>\n'
        "<ocs>\n"
        " <meta>\n"
        "  <status>failure</status>\n"
        "  <statuscode>997</statuscode>\n"
        "  <message>Current user is not logged in</message>\n"
        " </meta>\n"
        " <data/>\n"
        "</ocs>\n"
    )
    response = await client.get("/ocs/v2.php/apps/other/api", headers={"Accept": "application/xml"})
    assert response.status_code == 404
    root = parse_xml(response)
    assert (root.findtext("meta/status"), root.findtext("meta/statuscode")) == ("failure", "404")


async def test_412_stays_json_when_xml_is_asked(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get(PATH, params={"format": "xml"}, headers=bearer(user.token))
    assert response.status_code == 412
    assert json.loads(response.content) == {"message": "CSRF check failed"}


async def test_unknown_format_falls_back_to_json(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    response = await client.get(
        PATH, params={"format": "yaml"}, headers={**bearer(user.token), **OCS}
    )
    assert_ok(response)


async def test_user_name_is_escaped_in_xml(
    client: httpx.AsyncClient, server: RunningServer
) -> None:
    from controlcenter.auth.passwords import hash_password_off_loop
    from controlcenter.auth.service import create_user
    from tests.dbtools import create_api_token

    password_hash = await hash_password_off_loop("pw")

    def user_with_token(session: Session) -> str:
        user = create_user(
            session, email="x@example.com", password_hash=password_hash, name="<b>&amp;</b>"
        )
        return create_api_token(session, user)

    token = await server.db.run_write(user_with_token)
    response = await client.get(PATH, params={"format": "xml"}, headers={**bearer(token), **OCS})
    assert "<b>&amp;</b>" in (parse_xml(response).findtext("data/message") or "")


async def test_other_methods_are_json_405(client: httpx.AsyncClient) -> None:
    response = await client.post(PATH, headers=OCS)
    assert response.status_code == 405
    assert response.json() == {"error": "Method not allowed"}


async def test_openapi_describes_the_operation(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert schema["info"]["version"] == "0.0.1"
    operation = schema["paths"]["/ocs/v2.php/apps/{app_id}/api"]["get"]
    assert operation["operationId"] == "api-index"
    assert operation["tags"] == ["api"]
    schemes = schema["components"]["securitySchemes"]
    by_scheme = {
        schemes[name]["scheme"] for requirement in operation["security"] for name in requirement
    }
    assert by_scheme == {"bearer", "basic"}
    header = next(p for p in operation["parameters"] if p["in"] == "header")
    assert header["name"] == "OCS-APIRequest"
    assert header["required"] is True
    assert header["schema"] == {"type": "boolean", "default": True}
    assert {"200", "401"} <= set(operation["responses"])
    data = operation["responses"]["200"]["content"]["application/json"]["schema"]
    data = data["properties"]["ocs"]["properties"]["data"]
    assert data["required"] == ["message"]
