"""GET on the index through the app: each answer's exact head and body, the request id, the
metrics, and the credentials read from the database on every request."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlalchemy import update

from controlcenter.accounts.users import OPERATOR, UserChanges, delete_user, update_user
from controlcenter.auth.models import SUPER_ADMIN, UserRecord
from controlcenter.ocs.envelope import NOT_FOUND, NOT_LOGGED_IN, envelope, render
from controlcenter.ocs.index import ok_json
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import writing
from tests.metric_samples import scrape
from tests.ocs.test_index import OCS, PATH, basic, bearer

TEMPLATE = "/ocs/v2.php/apps/{app_id}/api"
JSON = b"application/json; charset=utf-8"
XML = b"application/xml; charset=utf-8"


def _head(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The answer's headers in order, but the server's own (`date`, `server`)."""
    return [
        (k.lower(), v) for k, v in response.headers.raw if k.lower() not in (b"date", b"server")
    ]


def _expected(content_type: bytes, body: bytes, rid: bytes) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", content_type),
        (b"x-request-id", rid),
    ]


async def test_each_answer_has_its_exact_head_and_body(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    message = f"Welcome to the Control Center dashboard API, {user.name}."
    ok_xml = render(envelope(200, "OK", {"message": message}), "xml")
    unauthorised = {f: render(envelope(997, NOT_LOGGED_IN, []), f) for f in ("json", "xml")}
    not_found = {f: render(envelope(404, NOT_FOUND, []), f) for f in ("json", "xml")}
    csrf = b'{"message":"CSRF check failed"}'
    other = "/ocs/v2.php/apps/other/api"
    cases = [
        (PATH, {**bearer(user.token), **OCS}, 200, JSON, ok_json(message)),
        (PATH, {**bearer(user.token), **OCS, "Accept": "application/xml"}, 200, XML, ok_xml),
        (PATH, {**basic(user.email, user.api_token), **OCS}, 200, JSON, ok_json(message)),
        (PATH, {**basic(user.email, user.password), **OCS}, 200, JSON, ok_json(message)),
        (PATH + "?format=xml", {**bearer(user.token), **OCS}, 200, XML, ok_xml),
        (PATH, bearer(user.token), 412, b"application/json", csrf),
        (PATH, {**bearer("nope"), **OCS}, 401, JSON, unauthorised["json"]),
        (PATH, {"Accept": "text/xml"}, 401, XML, unauthorised["xml"]),
        (other, {**bearer(user.token), **OCS}, 404, JSON, not_found["json"]),
        (other + "?format=xml", OCS, 404, XML, not_found["xml"]),
    ]
    for n, (path, headers, status, content_type, body) in enumerate(cases):
        rid = f"case-{n}"
        response = await client.get(path, headers={**headers, "X-Request-ID": rid})
        assert response.status_code == status, (n, response.content)
        assert response.content == body, n
        assert _head(response) == _expected(content_type, body, rid.encode()), n


@pytest.mark.parametrize("name", ['Zoë "Q" <b>&amp;</b>', "tab\there\x01", "\u2028 \U0001f600 \\"])
def test_the_200_json_is_the_rendered_envelope(name: str) -> None:
    message = f"Welcome to the Control Center dashboard API, {name}."
    assert ok_json(message) == render(envelope(200, "OK", {"message": message}), "json")


async def test_request_id_is_echoed_or_made(client: httpx.AsyncClient, users: UserFactory) -> None:
    user = await users.create()
    given = await client.get(PATH, headers={**bearer(user.token), **OCS, "X-Request-ID": "abc-1"})
    assert given.headers["X-Request-ID"] == "abc-1"
    for headers in ({**OCS, "X-Request-ID": "bad id"}, OCS):
        made = (await client.get(PATH, headers=headers)).headers["X-Request-ID"]
        assert re.fullmatch("[0-9a-f]{32}", made), made
    first, second = [await client.get(PATH, headers=OCS) for _ in range(2)]
    assert first.headers["X-Request-ID"] != second.headers["X-Request-ID"]


async def test_metrics_count_each_answer_by_template_method_and_status(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    before = await scrape(client)
    await client.get(PATH, headers={**bearer(user.token), **OCS})
    await client.get(PATH, headers={**bearer(user.token), **OCS})
    await client.get(PATH, headers=OCS)
    await client.get(PATH, headers=bearer(user.token))
    await client.get("/ocs/v2.php/apps/other/api", headers=OCS)
    after = await scrape(client)

    def grew(name: str, **labels: str) -> float:
        key = (name, frozenset({"route": TEMPLATE, "method": "GET", **labels}.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("controlcenter_http_requests_total", status="200") == 2
    assert grew("controlcenter_http_requests_total", status="401") == 1
    assert grew("controlcenter_http_requests_total", status="412") == 1
    assert grew("controlcenter_http_requests_total", status="404") == 1
    assert grew("controlcenter_http_request_duration_seconds_count") == 5
    assert grew("controlcenter_http_request_duration_seconds_sum") > 0


async def test_a_change_to_the_user_takes_effect_at_the_next_request(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    """Credentials are kept in memory after their first check, and a change made through the
    service counts at the next request: a rename shows, disabling and deleting the user
    refuse its session, its API token and its password at once."""
    await users.create(SUPER_ADMIN)  # never the last one
    for end in ("disabled", "deleted"):
        user = await users.create()
        kinds = [bearer(user.token), bearer(user.api_token), basic(user.email, user.password)]
        for headers in kinds * 2:
            assert (await client.get(PATH, headers={**headers, **OCS})).status_code == 200
        await update_user(server.db, user.id, UserChanges(name=end), actor_role=OPERATOR)
        for headers in kinds:
            answer = await client.get(PATH, headers={**headers, **OCS})
            assert answer.json()["ocs"]["data"]["message"].endswith(f"{end}.")
        if end == "disabled":
            changes = UserChanges(disabled=True)
            await update_user(server.db, user.id, changes, actor_role=OPERATOR)
        else:
            await delete_user(server.db, user.id, actor_role=OPERATOR)
        for headers in kinds:
            assert (await client.get(PATH, headers={**headers, **OCS})).status_code == 401


async def test_the_message_follows_a_renamed_user(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    async with writing(server.db) as db:
        await db.execute(update(UserRecord).where(UserRecord.id == user.id).values(name="Renamed"))
    answer = await client.get(PATH, headers={**bearer(user.token), **OCS})
    assert answer.json()["ocs"]["data"]["message"].endswith("Renamed.")


async def test_an_unexpected_error_is_a_logged_json_500_with_its_request_id(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr("controlcenter.ocs.router.answer_index", broken)
    before = await scrape(client)
    response = await client.get(PATH, headers={**OCS, "X-Request-ID": "err-1"})
    after = await scrape(client)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "Internal server error"}
    assert response.headers["X-Request-ID"] == "err-1"
    key = (
        "controlcenter_http_requests_total",
        frozenset({"route": TEMPLATE, "method": "GET", "status": "500"}.items()),
    )
    assert after.get(key, 0.0) - before.get(key, 0.0) == 1
    logged = capsys.readouterr().err
    assert "unhandled error" in logged and "err-1" in logged and "the database went away" in logged
