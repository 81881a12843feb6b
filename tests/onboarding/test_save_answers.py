"""POST /api/v1/onboarding through the app: every way a caller shows itself or fails to, and
every kind of body, each with its answer, its request id and its metrics."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.conftest import AppUser, RunningServer, UserFactory
from tests.metric_samples import scrape

URL = "/api/v1/onboarding"
FULL = {"yearsInBusiness": "10+", "crmPainPoints": ["café ☕"], "brokerageName": "Acme"}
ONE_MIB = 1024 * 1024


def _requests(user: AppUser, origin: str) -> list[tuple[dict[str, str], bytes]]:
    """Headers and body: every way a caller shows itself or fails to, and every kind of body."""
    token, cookie = user.token, {"Cookie": f"session={user.token}"}
    body = json.dumps(FULL).encode()
    return [
        ({"Authorization": f"Bearer {token}"}, body),
        ({"Authorization": f"bearer   {token}"}, body),
        ({"Authorization": f"Bearer {user.api_token}"}, body),
        ({"Authorization": "Bearer"}, body),
        ({"Authorization": "Bearer nope"}, body),
        ({"Authorization": "Bearer nope", **cookie}, body),  # a bearer decides on its own
        ({"Authorization": "Basic dXNlcjpwdw==", **cookie}, body),  # not a bearer: the cookie
        (cookie, body),
        ({"Cookie": "session="}, body),
        ({"Cookie": f"other=1; session={token}; x=2"}, body),
        ({}, body),
        ({**cookie, "Origin": "https://evil.example"}, body),
        ({**cookie, "Sec-Fetch-Site": "cross-site"}, body),
        ({**cookie, "Sec-Fetch-Site": "same-origin", "Origin": origin}, body),
        ({"Authorization": f"Bearer {token}", "Sec-Fetch-Site": "cross-site"}, body),
        ({"Authorization": f"Bearer {token}"}, b"{not json"),
        ({"Authorization": f"Bearer {token}"}, b""),
        ({"Authorization": f"Bearer {token}"}, b'{"usingOtherCrm": "yes", "goalsSelected": 3}'),
        ({"Authorization": f"Bearer {token}"}, b'["a list"]'),
        ({"Authorization": f"Bearer {token}"}, b'{"currentCrmName": "\\ud800"}'),
        ({"Authorization": f"Bearer {token}"}, b'{"yearsInBusiness": NaN}'),
        ({"Authorization": f"Bearer {token}"}, b" " * (ONE_MIB + 1)),
        ({}, b" " * (ONE_MIB + 1)),  # over the limit is 413 before the caller is known
        ({"Authorization": f"Bearer {token}", "X-Request-ID": "given-1"}, body),
    ]


def _head(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The answer's headers in order, but the server's own (`date`, `server`) and the id."""
    skipped = (b"date", b"server", b"x-request-id")
    return [(k.lower(), v) for k, v in response.headers.raw if k.lower() not in skipped]


async def _send_all(server: RunningServer, user: AppUser) -> list[httpx.Response]:
    # A client per request: a 413 closes its connection.
    answers = []
    for headers, body in _requests(user, server.url):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            answers.append(await http.post(URL, headers=headers, content=body))
    return answers


async def test_each_request_gets_its_answer(server: RunningServer, users: UserFactory) -> None:
    user = await users.create()
    answers = await _send_all(server, user)
    assert [r.status_code for r in answers] == [
        200, 200, 200, 401, 401, 401, 200, 200, 401, 200, 401, 403, 403, 200, 200,
        500, 500, 400, 400, 400, 500, 413, 413, 200,
    ]  # fmt: skip
    bodies = {
        401: {"error": "Unauthorized"},
        403: {"error": "Cross-origin request refused"},
        413: {"error": "Request body too large"},
        500: {"error": "Failed to save onboarding"},
    }
    for answer in answers:
        if answer.status_code in bodies:
            assert answer.json() == bodies[answer.status_code]
    saved = answers[0].json()
    assert saved["success"] is True
    assert saved["onboarding"]["crmPainPoints"] == '["café ☕"]'
    assert answers[0].content.decode().count("café ☕") == 1  # not \u-escaped, as JSONResponse
    assert _head(answers[0]) == [
        (b"content-length", str(len(answers[0].content)).encode()),
        (b"content-type", b"application/json"),
    ]
    assert [i["path"] for i in answers[17].json()["details"]] == [
        ["usingOtherCrm"],
        ["goalsSelected"],
    ]
    assert _head(answers[21]) == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answers[21].content)).encode()),
        (b"connection", b"close"),
    ]
    assert answers[-1].headers["X-Request-ID"] == "given-1"
    assert all(re.fullmatch("[0-9a-f]{32}", r.headers["X-Request-ID"]) for r in answers[:-1])


async def test_metrics_count_each_answer_by_template_method_and_status(
    server: RunningServer, users: UserFactory
) -> None:
    """What is refused before routing (cross-origin) is counted under `unmatched`."""
    user = await users.create()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        before = await scrape(client)
        # None over the limit, so one connection serves them all.
        for headers, body in _requests(user, server.url)[:15]:
            await client.post(URL, headers=headers, content=body)
        after = await scrape(client)
    grown = {
        (dict(key[1])["route"], dict(key[1])["status"]): after[key] - before.get(key, 0.0)
        for key in after
        if key[0] == "controlcenter_http_requests_total"
        and dict(key[1]).get("method") == "POST"
        and dict(key[1]).get("route") in (URL, "unmatched")
        and after[key] != before.get(key, 0.0)
    }
    assert grown == {(URL, "200"): 8, (URL, "401"): 5, ("unmatched", "403"): 2}


async def test_an_unexpected_error_is_a_logged_json_500_with_its_request_id(
    client: httpx.AsyncClient,
    users: UserFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = await users.create()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the parser went away")

    monkeypatch.setattr("controlcenter.onboarding.router.parse_json", broken)
    response = await client.post(
        URL, headers={**user.headers, "X-Request-ID": "err-2"}, json={"yearsInBusiness": "1"}
    )
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "Internal server error"}
    assert response.headers["X-Request-ID"] == "err-2"
    logged = capsys.readouterr().err
    assert "unhandled error" in logged and "err-2" in logged and "the parser went away" in logged
