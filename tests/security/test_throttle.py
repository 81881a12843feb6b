"""Sign-in throttling: per e-mail and source together, per source, and the per-e-mail ceiling;
reset on success; HTTP basic with a password on the dashboard index. Across processes:
tests/security/test_served.py.

The test server trusts X-Forwarded-For from 127.0.0.1 (uvicorn's default), so each request
says which source it comes from.
"""

from __future__ import annotations

import asyncio
import base64
import time

import httpx
import pytest

from controlcenter.auth.throttle import SignInThrottle, TooManyAttemptsError, source_of
from tests.conftest import RunningServer, UserFactory
from tests.fakes.clock import ManualClock

TOO_MANY = {"error": "Too many attempts"}
WINDOW_S = 900
INDEX = "/ocs/v2.php/apps/dashboard/api"
ATTACKER = "203.0.113.66"
OWNER = "198.51.100.7"


def came_from(source: str) -> dict[str, str]:
    return {"X-Forwarded-For": source}


async def login(
    client: httpx.AsyncClient, email: str, password: str, source: str = ATTACKER
) -> httpx.Response:
    return await client.post(
        "/api/v1/auth/login",
        json={"email": email, "password": password},
        headers=came_from(source),
    )


def assert_throttled(response: httpx.Response) -> None:
    assert (response.status_code, response.json()) == (429, TOO_MANY)
    assert 0 < int(response.headers["retry-after"]) <= WINDOW_S
    assert "set-cookie" not in response.headers


async def test_one_attacker_cannot_lock_the_owner_out(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user, other = await users.create(), await users.create()
    for _ in range(10):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    eleventh = await login(client, user.email, "wrong-password")
    assert_throttled(eleventh)
    assert int(eleventh.headers["retry-after"]) > WINDOW_S - 60  # the window just started
    # From that source even the right password waits: the attacker cannot tell it is right.
    assert_throttled(await login(client, user.email, user.password))
    assert_throttled(await login(client, user.email.upper(), user.password))  # same e-mail
    # The owner, from anywhere else, signs in; other accounts are open to that source too.
    assert (await login(client, user.email, user.password, OWNER)).status_code == 200
    assert (await login(client, other.email, other.password)).status_code == 200
    assert (await client.get("/api/v1/auth/me", headers=user.headers)).status_code == 200


async def test_an_unknown_email_is_throttled_the_same_way(client: httpx.AsyncClient) -> None:
    for _ in range(10):
        assert (await login(client, "nobody@example.com", "guess")).status_code == 401
    assert_throttled(await login(client, "nobody@example.com", "guess"))
    assert (await login(client, "nobody@example.com", "guess", OWNER)).status_code == 401


async def test_a_success_clears_the_count_of_its_source(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for _ in range(9):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    assert (await login(client, user.email, user.password)).status_code == 200
    for _ in range(10):  # ten fresh failures are allowed again
        assert (await login(client, user.email, "wrong-password")).status_code == 401
    assert_throttled(await login(client, user.email, "wrong-password"))


async def test_fifty_failures_from_one_source_block_it(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for n in range(50):  # five per e-mail: no e-mail reaches its own limit
        response = await login(client, f"spray{n % 10}@example.com", "wrong-password")
        assert response.status_code == 401, n
    assert_throttled(await login(client, user.email, user.password))
    assert (await login(client, user.email, user.password, OWNER)).status_code == 200


async def test_one_ipv6_subscriber_is_one_source(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    """An attacker's /64 holds 2^64 addresses: they count as one source."""
    user = await users.create()
    for n in range(10):
        response = await login(client, user.email, "wrong-password", f"2001:db8:1:2::{n + 1:x}")
        assert response.status_code == 401
    assert_throttled(await login(client, user.email, user.password, "2001:db8:1:2:ffff::9"))
    assert (await login(client, user.email, user.password, "2001:db8:1:3::1")).status_code == 200


async def test_the_ceiling_of_one_email_needs_ten_sources(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    """100 failures within the window, from every source together, close the account to
    every source until the window has passed: what a distributed guesser can reach."""
    user = await users.create()
    for source in range(10):
        for _ in range(10):
            response = await login(client, user.email, "wrong", f"192.0.2.{source + 1}")
            assert response.status_code == 401
    assert_throttled(await login(client, user.email, user.password, OWNER))
    other = await users.create()
    assert (await login(client, other.email, other.password, OWNER)).status_code == 200


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


def throttle_on(server: RunningServer, clock: ManualClock) -> SignInThrottle:
    return SignInThrottle(
        server.db, window_s=WINDOW_S, per_email_and_source=3, per_source=5, per_email=6, clock=clock
    )


async def refused_for(throttle: SignInThrottle, email: str, address: str) -> int:
    with pytest.raises(TooManyAttemptsError) as refused:
        await throttle.begin(email, address)
    return refused.value.retry_after_s


async def test_the_window_passes_and_retry_after_says_when(server: RunningServer) -> None:
    clock = ManualClock(start=time.time())
    throttle = throttle_on(server, clock)
    for _ in range(3):
        await throttle.begin("slow@example.com", "192.0.2.1")
        clock.advance(100)
    # The oldest of the three counted was 300 s ago: it leaves the window in 600 s.
    assert await refused_for(throttle, "slow@example.com", "192.0.2.1") == WINDOW_S - 300
    clock.advance(WINDOW_S - 300 - 1)
    assert await refused_for(throttle, "slow@example.com", "192.0.2.1") == 1
    clock.advance(1)
    attempt = await throttle.begin("slow@example.com", "192.0.2.1")
    await throttle.succeeded(attempt)


async def test_the_ceiling_counts_every_source_and_holds_for_the_window(
    server: RunningServer,
) -> None:
    clock = ManualClock(start=time.time())
    throttle = throttle_on(server, clock)
    for n in range(6):  # two sources, three each: each pair at its limit, the ceiling too
        await throttle.begin("owner@example.com", f"192.0.2.{n % 2 + 1}")
        clock.advance(10)
    assert await refused_for(throttle, "owner@example.com", "198.51.100.7") == WINDOW_S - 60
    # A success elsewhere is not possible meanwhile; the ceiling lifts with the window.
    clock.advance(WINDOW_S - 60)
    attempt = await throttle.begin("owner@example.com", "198.51.100.7")
    await throttle.succeeded(attempt)
    # The success cleared only its own source's count: a guesser's two failures still in the
    # window still count, so one more is its last.
    await throttle.begin("owner@example.com", "192.0.2.1")
    assert await refused_for(throttle, "owner@example.com", "192.0.2.1") > 0


@pytest.mark.parametrize(
    ("address", "source"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::", "2001:db8:1:2::/64"),
        ("unix-socket", "unix-socket"),
        (None, ""),
    ],
)
def test_the_source_of_an_address(address: str | None, source: str) -> None:
    assert source_of(address) == source


def basic(email: str, secret: str, source: str = ATTACKER) -> dict[str, str]:
    value = base64.b64encode(f"{email}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {value}", "OCS-APIRequest": "true", **came_from(source)}


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
    owner = await client.get(INDEX, headers=basic(user.email, user.password, OWNER))
    assert owner.status_code == 200


async def test_a_basic_success_clears_the_count(
    client: httpx.AsyncClient, users: UserFactory
) -> None:
    user = await users.create()
    for _ in range(9):
        await client.get(INDEX, headers=basic(user.email, "wrong-password"))
    assert (await client.get(INDEX, headers=basic(user.email, user.password))).status_code == 200
    for _ in range(10):
        assert (await login(client, user.email, "wrong-password")).status_code == 401
