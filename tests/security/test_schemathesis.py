"""Schemathesis over /openapi.json against the running service.

Every operation, a bounded number of positive and negative examples each, sent as a super
administrator's API token (so that every operation is reached and no session is revoked on
the way), and every one of Schemathesis' checks on every answer: its status, content type,
headers and body are the interface description's; a request the description calls valid is
not refused and one it calls invalid is; and the operation refuses the request without the
token (the token is given as Schemathesis' own auth configuration, which is how its auth
checks learn it). No 5xx may appear except the two documented 500s (a body that is not JSON
on onboarding and settings PUT).

Spared, answer by answer (docs/testing.md): the check that valid data is accepted, for a 400
that a well-formed request gets from the service's state or the caller's credentials
(`STATE_REFUSALS`) or for a body holding what JSON Schema allows and every body's description
excludes; the check that invalid data is refused, for a negative case that repeats a query
parameter.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
)

from controlcenter.accounts.own_router import WRONG_PASSWORD
from controlcenter.auth.router import NOT_A_SESSION
from controlcenter.chat.request import MISSING_MESSAGE
from controlcenter.chat.router import INVALID_LAST_EVENT_ID
from controlcenter.chat.service import MISSING_API_KEY
from controlcenter.web.pagination import INVALID_CURSOR
from controlcenter.web.validation import text_problem
from tests.conftest import RunningServer, UserFactory

EXAMPLES_PER_OPERATION = 20  # per generation mode
# The only 500s a client can cause on purpose: a body that is not JSON (docs/reference.md).
DOCUMENTED_500 = {
    ("POST", "/api/v1/onboarding"): {"error": "Failed to save onboarding"},
    ("PUT", "/api/v1/admin/settings"): {"error": "Failed to update settings"},
}
CHECKS = [response_schema_conformance, content_type_conformance]

# Operations added last, named so that losing one from the document fails here.
NEWEST_OPERATIONS = {
    ("PATCH", "/api/v1/control-center/conversations/{conversation_id}"),
    ("GET", "/api/v1/control-center/conversations"),
    ("GET", "/api/v1/control-center/providers"),
    ("GET", "/api/v1/control-center/tools"),
    ("GET", "/api/v1/admin/mcp-servers"),
    ("POST", "/api/v1/admin/mcp-servers"),
    ("GET", "/api/v1/admin/mcp-servers/status"),
    ("PATCH", "/api/v1/admin/mcp-servers/{server_id}"),
    ("DELETE", "/api/v1/admin/mcp-servers/{server_id}"),
    ("POST", "/api/v1/admin/integrations/{name}/test"),
    ("GET", "/api/v1/control-center/activity"),
    ("POST", "/api/v1/control-center/activity/{entry_id}/undo"),
    ("GET", "/api/v1/admin/activity"),
}

Body = dict[str, Any]
NO_KEY = {MISSING_API_KEY.format(provider=name) for name in ("provider_a", "provider_b")}


def _error(*texts: str) -> Callable[[Body], bool]:
    return lambda body: body.get("error") in texts


# Well-formed requests refused by the state of the service or the caller's credentials, which
# no interface description can state; each answer named here (and only it) is spared the
# check that valid data is accepted.
STATE_REFUSALS: dict[tuple[str, str], Callable[[Body], bool]] = {
    # The fuzzer signs in with an API token, and logout refuses a token: it is no session.
    ("POST", "/api/v1/auth/logout"): _error(NOT_A_SESSION),
    # A password change needs the caller's current password, which the fuzzer cannot guess.
    ("POST", "/api/v1/auth/password"): lambda body: body.get("details") == [WRONG_PASSWORD],
    # A chat needs its provider's API key in the settings; none is set for the fuzzer.
    ("POST", "/api/v1/control-center/chat"): _error(*NO_KEY),
    # Also: the AI SDK's message list must end with the user's text, which JSON Schema
    # cannot say of a list's last item.
    ("POST", "/api/v1/control-center/ui-chat"): _error(*NO_KEY, MISSING_MESSAGE),
    # A well-formed Last-Event-ID of another message than the path's.
    ("GET", "/api/v1/control-center/chat/{message_id}/events"): _error(INVALID_LAST_EVENT_ID),
    # Cursors are opaque: only one the service issued names a place in the list.
    ("GET", "/api/v1/control-center/conversations"): _error(INVALID_CURSOR),
    ("GET", "/api/v1/control-center/activity"): _error(INVALID_CURSOR),
    ("GET", "/api/v1/admin/activity"): _error(INVALID_CURSOR),
    ("GET", "/api/v1/admin/users"): lambda body: (
        [issue.get("message") for issue in body.get("details", [])] == [INVALID_CURSOR]
    ),
}


def _holds_text_json_schema_allows(value: Any) -> bool:
    """Whether a body holds what its JSON Schema calls valid and every body of the service
    refuses (the bodies' description says so): a lone surrogate, which no pattern can name; NUL
    in a value of a key the schema leaves open; an integer written with a fraction part
    (`1000.0`), a JSON Schema integer that the strict bodies read as a float."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, str):
        return text_problem(value) is not None
    if isinstance(value, dict):
        return any(_holds_text_json_schema_allows(item) for pair in value.items() for item in pair)
    if isinstance(value, list):
        return any(_holds_text_json_schema_allows(item) for item in value)
    return False


def refused_by_state(method: str, path: str, response: requests.Response) -> bool:
    accepts = STATE_REFUSALS.get((method, path))
    if accepts is None or response.status_code != 400:
        return False
    body = response.json()
    return isinstance(body, dict) and accepts(body)


def repeats_a_query_parameter(case: Any) -> bool:
    """A negative case whose query gives a parameter twice: a query string is text, and the
    service reads the last of a repeated parameter (FastAPI's rule), which may be valid."""
    query = case.query or {}
    return case.meta.is_negative_at(ParameterLocation.QUERY) and any(
        isinstance(value, list) for value in query.values()
    )


def fuzz(base_url: str, token: str) -> tuple[set[tuple[str, str]], int, list[str]]:
    """The operations exercised, the requests sent and the problems found."""
    # The token as Schemathesis' own auth configuration: it sends it as the `bearer_auth`
    # scheme, and its checks of the operations' auth know it is valid and probe without it.
    config = schemathesis.Config.from_dict(
        {"auth": {"openapi": {"bearer_auth": {"bearer": token}}}}
    )
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config)
    headers = {"OCS-APIRequest": "true"}
    session = requests.Session()
    exercised: set[tuple[str, str]] = set()
    problems: list[str] = []
    sent = 0

    def send(case: Any) -> None:
        nonlocal sent
        method, path = case.method.upper(), case.path
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=30)
        sent += 1
        exercised.add((method, path))
        where = f"{method} {path}"
        if response.status_code >= 500:
            documented = DOCUMENTED_500.get((method, path))
            if response.status_code != 500 or documented is None or response.json() != documented:
                problems.append(f"{where}: {response.status_code} {response.text[:200]}")
            return
        # The 5xx rule above is this test's own: two 500s are documented answers.
        excluded = [not_a_server_error]
        if response.status_code == 400 and (
            refused_by_state(method, path, response) or _holds_text_json_schema_allows(case.body)
        ):
            excluded.append(positive_data_acceptance)
        if repeats_a_query_parameter(case):
            excluded.append(negative_data_rejection)
        try:
            case.validate_response(
                response,
                excluded_checks=excluded,
                headers=headers,
                transport_kwargs={"base_url": base_url, "session": session, "headers": headers},
            )
        except (AssertionError, BaseExceptionGroup) as exc:
            problems.append(f"{where}: {str(exc)[:600]}")

    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run = settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],  # problems are collected, not shrunk
            )(given(case=operation.as_strategy(generation_mode=mode))(send))
            try:
                run()
            except Unsatisfiable:
                # An operation that takes no input has no invalid request to make.
                assert mode is GenerationMode.NEGATIVE, operation.label
    return exercised, sent, problems


# Thousands of requests: the suite's per-test guard against a hang is sized for one request's
# test, not for this one on a loaded machine.
@pytest.mark.timeout(900)
async def test_schemathesis_runs_every_check_on_every_operation(
    server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    described = server.app.openapi()["paths"]
    every = {(method.upper(), path) for path, item in described.items() for method in item}
    # The service keeps serving on this loop while the fuzzer's synchronous client runs.
    exercised, sent, problems = await asyncio.to_thread(fuzz, server.url, admin.api_token)
    print(f"schemathesis: {len(exercised)} operations, {sent} requests, {len(problems)} problems")
    assert exercised == every
    assert exercised >= NEWEST_OPERATIONS
    assert sent >= len(every) * EXAMPLES_PER_OPERATION
    assert problems == []


def answer(url: str, body: bytes) -> requests.Response:
    """The real answer of `url`, its body replaced by `body`."""
    response = requests.get(url, timeout=30)
    response._content = body
    return response


async def test_the_checks_catch_a_schema_violation(server: RunningServer) -> None:
    """The fuzz test above can fail: a /healthz answer outside its schema is reported."""

    def check() -> None:
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        operation = schema["/healthz"]["GET"]
        case = operation.Case()
        url = f"{server.url}/healthz"
        case.validate_response(answer(url, b'{"status":"ok"}'), checks=CHECKS)
        try:
            case.validate_response(answer(url, b'{"status":5}'), checks=CHECKS)
        except BaseExceptionGroup as exc:
            assert "schema" in str(exc).lower()
        else:
            raise AssertionError("a schema violation went unnoticed")

    await asyncio.to_thread(check)


async def test_schemathesis_command_line_runs_against_the_service(
    server: RunningServer, users: UserFactory, tmp_path: Path
) -> None:
    """The `schemathesis` command of this environment tests two operations of the served app
    with all its checks, and every case it generates passes (it runs on urllib3 itself)."""
    admin = await users.create("super_admin")
    command = Path(sys.executable).with_name("schemathesis")
    process = await asyncio.create_subprocess_exec(
        str(command),
        "run",
        f"{server.url}/openapi.json",
        "--checks=all",
        "--exclude-checks=not_a_server_error",
        "--include-path=/healthz",
        "--include-path=/api/v1/control-center/providers",
        "--max-examples=5",
        "--seed=1",
        "--no-color",
        f"--header=Authorization: Bearer {admin.api_token}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1"},
        cwd=tmp_path,  # where it keeps its cache
    )
    output, _ = await process.communicate()
    text = output.decode()
    assert process.returncode == 0, text
    assert "Tested: 2\n" in text, text
    assert re.search(r"(\d+) generated, \1 passed", text), text
    assert "No issues found" in text, text
