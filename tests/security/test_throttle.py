"""Sign-in throttling: per e-mail, per client address, reset on success, HTTP basic
with a password on the dashboard index. Across processes: tests/security/test_served.py."""

from __future__ import annotations

import asyncio
import base64

import httpx

from controlcenter.auth.throttle import SignInThrottle, TooManyAttemptsError
from tests.conftest import RunningServer, UserFactory

TOO_MANY = {"error": "Too many attempts"}
WINDOW_S = 900
INDEX = "/ocs/v2.php/apps/dashboard/api"


async def login(client: httpx.AsyncClient, email: str, password: str) -> httpx.Response:
    return await client.post("/api/v1/auth/login", json={"email": email, "password": password})


def assert_throttled(response: httpx.Response) -> None:
    assert (response.status_code, response.json()) == (429, TOO_MANY)
    assert 0 < int(response.headers["retry-after"]) <= WINDOW_S
    assert "set-cookie" not in response.headers


async def test_the_eleventh_wrong_password_for_an_email_answers_429(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user, other = await users.create(), await users.create()
    for _ in range(10):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    eleventh = await login(client, user.email, "wrong-password")
    assert_throttled(eleventh)
    assert int(eleventh.headers["retry-after"]) > WINDOW_S - 60  # the window just started
    # Even the right password waits for the window: the attacker cannot tell it is right.
    assert_throttled(await login(client, user.email, user.password))
    assert_throttled(await login(client, user.email.upper(), user.password))  # same e-mail
    # Other accounts are not locked out, and an existing session keeps working.
    assert (await login(client, other.email, other.password)).status_code == 200
    assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 200


async def test_an_unknown_email_is_throttled_the_same_way(client: httpx.AsyncClient) -> None:
    for _ in range(10):
        assert (await login(client, "nobody@example.com", "guess")).status_code == 401
    assert_throttled(await login(client, "nobody@example.com", "guess"))


async def test_a_success_clears_the_emails_count(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for _ in range(9):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    assert (await login(client, user.email, user.password)).status_code == 200
    for _ in range(10):  # ten fresh failures are allowed again
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    assert_throttled(await login(client, user.email, "wrong-password"))


async def test_fifty_failures_from_one_address_block_it(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for n in range(50):  # five per e-mail: no e-mail reaches its own limit
        response = await login(client, f"spray{n % 10}@example.com", "wrong-password")
        assert response.status_code == 401, n
    assert_throttled(await login(client, user.email, user.password))


async def test_a_burst_of_concurrent_attempts_lets_at_most_the_limit_through(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    answers = await asyncio.gather(
        *(login(client, user.email, "wrong-password") for _ in range(30))
    )
    statuses = [response.status_code for response in answers]
    assert statuses.count(401) <= 10 and set(statuses) <= {401, 429}
    # Refused attempts did not count: exactly ten failures in all lead to the block.
    failures = statuses.count(401)
    while (response := await login(client, user.email, "wrong-password")).status_code == 401:
        failures += 1
    assert_throttled(response)
    assert failures == 10


async def test_the_window_passes(server: RunningServer) -> None:
    throttle = SignInThrottle(server.db, window_s=1.0, per_email=2, per_address=100)
    for _ in range(2):
        await throttle.begin("slow@example.com", "192.0.2.1")
    try:
        await throttle.begin("slow@example.com", "192.0.2.1")
    except TooManyAttemptsError as exc:
        assert exc.retry_after_s == 1
    else:
        raise AssertionError("the third attempt was let through")
    await asyncio.sleep(1.1)
    attempt = await throttle.begin("slow@example.com", "192.0.2.1")
    await throttle.succeeded(attempt)


def basic(email: str, secret: str) -> dict[str, str]:
    value = base64.b64encode(f"{email}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {value}", "OCS-APIRequest": "true"}


async def test_http_basic_with_a_password_on_the_index_is_throttled(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for _ in range(10):
        response = await client.get(INDEX, headers=basic(user.email, "wrong-password"))
        assert response.status_code == 401
    assert_throttled(await client.get(INDEX, headers=basic(user.email, user.password)))
    assert_throttled(await login(client, user.email, user.password))  # one count for both
    # An API token is no password: the account's scripts keep working.
    response = await client.get(INDEX, headers=basic(user.email, user.api_token))
    assert response.status_code == 200


async def test_a_basic_success_clears_the_count(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for _ in range(9):
        await client.get(INDEX, headers=basic(user.email, "wrong-password"))
    assert (await client.get(INDEX, headers=basic(user.email, user.password))).status_code == 200
    for _ in range(10):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
