"""POST /api/v1/onboarding is answered in front of the framework (`onboarding/fast_path.py`):
every answer the route and the stack give, it gives the same, with the request id and the
metrics the stack keeps."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from controlcenter.web.entry import ControlCenterApp
from tests.conftest import AppUser, RunningServer, UserFactory
from tests.metric_samples import scrape

URL = "/api/v1/onboarding"
FULL = {"yearsInBusiness": "10+", "crmPainPoints": ["café ☕"], "brokerageName": "Acme"}
ONE_MIB = 1024 * 1024


def _app(server: RunningServer) -> ControlCenterApp:
    assert isinstance(server.app, ControlCenterApp)
    return server.app


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


def _comparable(response: httpx.Response) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
    headers = sorted(
        (k.lower(), v)
        for k, v in response.headers.raw
        if k.lower() not in (b"date", b"x-request-id")
    )
    try:
        body: Any = response.json()
    except ValueError:
        body = response.content
    if isinstance(body, dict) and isinstance(body.get("onboarding"), dict):
        body["onboarding"] = {**body["onboarding"], "updatedAt": "(when)"}
    return response.status_code, body, headers


async def _send_all(server: RunningServer, user: AppUser) -> list[httpx.Response]:
    # A client per request: a 413 closes its connection.
    answers = []
    for headers, body in _requests(user, server.url):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            answers.append(await http.post(URL, headers=headers, content=body))
    return answers


async def test_the_route_and_the_fast_path_give_the_same_answers(
    server: RunningServer, users: UserFactory
) -> None:
    user = await users.create()
    fast = await _send_all(server, user)
    app = _app(server)
    app.save_fast_path, kept = None, app.save_fast_path  # as while tracing is on
    try:
        routed = await _send_all(server, user)
    finally:
        app.save_fast_path = kept
    assert [_comparable(r) for r in fast] == [_comparable(r) for r in routed]
    assert [r.status_code for r in fast] == [
        200, 200, 200, 401, 401, 401, 200, 200, 401, 200, 401, 403, 403, 200, 200,
        500, 500, 400, 400, 400, 500, 413, 413, 200,
    ]  # fmt: skip
    assert fast[0].json()["onboarding"]["crmPainPoints"] == '["café ☕"]'
    assert fast[0].content.decode().count("café ☕") == 1  # not \u-escaped, as JSONResponse
    assert fast[21].headers["connection"] == "close"
    assert fast[-1].headers["X-Request-ID"] == "given-1"
    assert re.fullmatch("[0-9a-f]{32}", fast[0].headers["X-Request-ID"])


async def test_metrics_count_each_answer_as_the_stack_does(
    server: RunningServer, users: UserFactory
) -> None:
    """By template, method and status; what is refused before routing under `unmatched`."""
    user = await users.create()
    grown = []
    app = _app(server)
    kept = app.save_fast_path
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for fast_path in (kept, None):
            app.save_fast_path = fast_path
            try:
                before = await scrape(client)
                # None over the limit, so one connection serves them all.
                for headers, body in _requests(user, server.url)[:15]:
                    await client.post(URL, headers=headers, content=body)
                after = await scrape(client)
            finally:
                app.save_fast_path = kept
            grown.append(
                {
                    key: after[key] - before.get(key, 0.0)
                    for key in after
                    if key[0].startswith("controlcenter_http_request")
                    # Times differ: a histogram's count is compared, not its buckets.
                    and not key[0].endswith(("_sum", "_bucket", "_created"))
                    and dict(key[1]).get("method") == "POST"
                    and dict(key[1]).get("route") in (URL, "unmatched")
                }
            )
    assert grown[0] == grown[1]
    total = "controlcenter_http_requests_total"
    assert grown[0][(total, frozenset({"route": URL, "method": "POST", "status": "200"}.items()))]
    unmatched = {"route": "unmatched", "method": "POST", "status": "403"}
    assert grown[0][(total, frozenset(unmatched.items()))] == 2


async def test_tracing_off_means_the_fast_path_is_on(server: RunningServer) -> None:
    assert _app(server).save_fast_path is not None


async def test_an_unexpected_error_is_a_logged_json_500_with_its_request_id(
    client: httpx.AsyncClient,
    users: UserFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = await users.create()

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr("controlcenter.onboarding.fast_path.saved", broken)
    response = await client.post(
        URL, headers={**user.headers, "X-Request-ID": "err-2"}, json={"yearsInBusiness": "1"}
    )
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "Internal server error"}
    assert response.headers["X-Request-ID"] == "err-2"
    logged = capsys.readouterr().err
    assert "unhandled error" in logged and "err-2" in logged and "the database went away" in logged
