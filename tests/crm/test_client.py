"""The CRM client against the fake: headers, scoping, typed errors, retries."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from structlog.testing import capture_logs

from controlcenter.common.retry import parse_retry_after
from controlcenter.crm.client import CrmClient
from controlcenter.crm.errors import (
    CrmAuthError,
    CrmError,
    CrmNotFound,
    CrmRateLimited,
    CrmRequestError,
    CrmUnavailable,
)
from controlcenter.crm.transport import CrmTransport, RetryPolicy
from tests.crm.conftest import Location
from tests.fakes.crm import FakeCrm


async def test_upsert_creates_then_updates_the_same_contact(
    fake_crm: FakeCrm, location: Location
) -> None:
    first = await location.client.upsert_contact(email="Ann@Example.com", firstName="Ann")
    again = await location.client.upsert_contact(email="ann@example.com", lastName="Lee")
    assert first["id"] == again["id"]
    stored = fake_crm.contacts(location.id)
    assert len(stored) == 1
    assert stored[0]["firstName"] == "Ann" and stored[0]["lastName"] == "Lee"
    call = fake_crm.calls_to("POST", "/contacts/upsert")[0]
    assert call.version == "2021-07-28"
    assert call.body["locationId"] == location.id


async def test_add_tags_keeps_existing_tags_and_is_idempotent(
    fake_crm: FakeCrm, location: Location
) -> None:
    contact = fake_crm.add_contact(location.id, email="b@example.com", tags=["vip"])
    assert await location.client.add_tags(contact["id"], ["onboarded"]) == ["vip", "onboarded"]
    assert await location.client.add_tags(contact["id"], ["onboarded"]) == ["vip", "onboarded"]
    assert await location.client.remove_tags(contact["id"], ["vip"]) == ["onboarded"]


async def test_family_versions_are_sent(fake_crm: FakeCrm, location: Location) -> None:
    await location.client.get("/conversations/search", {"locationId": location.id})
    await location.client.get("/opportunities/pipelines", {"locationId": location.id})
    assert fake_crm.calls[0].version == "2021-04-15"
    assert fake_crm.calls[1].version == "2021-07-28"


async def test_another_locations_contact_is_refused(fake_crm: FakeCrm, location: Location) -> None:
    other = fake_crm.add_location()
    theirs = fake_crm.add_contact(other["id"], email="secret@example.com")
    with pytest.raises(CrmAuthError) as caught:
        await location.client.get_contact(theirs["id"])
    assert caught.value.status == 403
    with pytest.raises(CrmAuthError):
        await location.client.add_tags(theirs["id"], ["x"])
    stored = fake_crm.contact(theirs["id"])
    assert stored is not None and stored["tags"] == []


async def test_path_ids_cannot_walk_to_another_path(fake_crm: FakeCrm, location: Location) -> None:
    with pytest.raises(CrmNotFound):
        await location.client.get_contact("../locations/" + location.id)


async def test_typed_errors_carry_the_apis_message(fake_crm: FakeCrm, location: Location) -> None:
    with pytest.raises(CrmNotFound) as missing:
        await location.client.get_contact("nope")
    assert missing.value.status == 404 and missing.value.message == "Contact not found"
    assert not missing.value.retryable
    with pytest.raises(CrmRequestError) as bad:
        await location.client.upsert_contact(email="not-an-email")
    assert bad.value.status == 422 and "email must be an email" in bad.value.message
    with pytest.raises(CrmRequestError) as neither:
        await location.client.upsert_contact(firstName="No Contact Data")
    assert neither.value.status == 400


async def test_a_wrong_token_never_appears_in_the_error(
    fake_crm: FakeCrm, transport: CrmTransport
) -> None:
    secret = "pit-this-is-a-secret-token-1234"
    client = CrmClient(transport, token=secret, location_id="loc")
    with pytest.raises(CrmAuthError) as caught:
        await client.get_contact("abc")
    assert caught.value.status == 401
    for text in (str(caught.value), repr(caught.value), caught.value.message, repr(client)):
        assert secret not in text


async def test_429_is_retried_honouring_retry_after(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.rate_limit(2, retry_after="0")
    assert await location.client.upsert_contact(email="c@example.com")
    assert [c.status for c in fake_crm.calls] == [429, 429, 200]


async def test_429_retry_after_in_seconds_is_waited(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.rate_limit(1, retry_after="1")
    started = time.monotonic()
    await location.client.get("/contacts/", {"locationId": location.id})
    assert time.monotonic() - started >= 0.95
    assert [c.status for c in fake_crm.calls] == [429, 200]


async def test_retry_after_longer_than_the_cap_fails_fast_and_retryable(
    fake_crm: FakeCrm, location: Location
) -> None:
    fake_crm.rate_limit(5, retry_after="120")
    with pytest.raises(CrmRateLimited) as caught:
        await location.client.get("/contacts/", {"locationId": location.id})
    assert caught.value.retryable and caught.value.retry_after == 120
    assert len(fake_crm.calls) == 1


async def test_persistent_429_gives_up_after_the_retries(
    fake_crm: FakeCrm, location: Location
) -> None:
    fake_crm.rate_limit(10, retry_after="0")
    with pytest.raises(CrmRateLimited):
        await location.client.get("/contacts/", {"locationId": location.id})
    assert len(fake_crm.calls) == 3  # one call and two retries


async def test_5xx_is_retried_then_raised(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.outage(503)
    with pytest.raises(CrmUnavailable) as caught:
        await location.client.get_contact("abc")
    assert caught.value.status == 503 and caught.value.retryable
    assert len(fake_crm.calls) == 3


async def test_5xx_is_not_retried_for_a_create(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.outage(500)
    with pytest.raises(CrmUnavailable):
        await location.client.post("/contacts/", {"locationId": location.id, "email": "d@x.io"})
    assert len(fake_crm.calls) == 1


async def test_connection_refused_is_retried_then_raised(
    fake_crm: FakeCrm, location: Location
) -> None:
    fake_crm.refuse_connections()
    try:
        with pytest.raises(CrmUnavailable) as caught:
            await location.client.get_contact("abc")
    finally:
        fake_crm.accept_connections()
    assert caught.value.status is None and caught.value.retryable
    assert location.token not in str(caught.value)


@asynccontextmanager
async def dropping_crm() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A CRM on 127.0.0.1 that reads each request whole and closes the connection without an
    answer: the request has reached it. Its address, and the requests it read."""
    received: list[bytes] = []

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        received.append(head + await reader.readexactly(length))
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.close()
        await server.wait_closed()


async def test_a_connection_dropped_after_the_request_repeats_only_reads() -> None:
    """The CRM may have acted on a request whose connection it closed without answering: a
    read is sent again, a create is not (a second contact would be made)."""
    async with dropping_crm() as (url, received):
        crm = CrmTransport(url, timeout_s=2.0, retry=RetryPolicy(2, 0.01, 1.0))
        client = CrmClient(crm, token="pit-token", location_id="loc-1")
        try:
            with pytest.raises(CrmUnavailable) as read:
                await client.get("/contacts/", {"locationId": "loc-1"})
            # The first try and two retries (aiohttp itself resends an idempotent request once
            # on a connection closed under it).
            reads = len(received)
            assert read.value.retryable and reads >= 3
            with pytest.raises(CrmUnavailable):
                await client.post("/contacts/", {"locationId": "loc-1", "email": "g@x.io"})
            assert len(received) == reads + 1  # the create was sent once
            assert received[-1].startswith(b"POST /contacts/")
        finally:
            await crm.aclose()


async def test_a_create_through_a_proxy_that_refuses_is_sent_again(
    fake_crm: FakeCrm, location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool uses a proxy the environment names, as httpx's own client would. One that
    refuses the connection sent nothing, so even a create is tried again, and the message
    says so."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed}")
    proxied = CrmTransport(fake_crm.url, timeout_s=2.0, retry=RetryPolicy(2, 0.01, 1.0))
    client = CrmClient(proxied, token=location.token, location_id=location.id)
    try:
        with capture_logs() as logs, pytest.raises(CrmUnavailable) as refused:
            await client.post("/contacts/", {"locationId": location.id, "email": "h@x.io"})
    finally:
        await proxied.aclose()
    assert str(refused.value.message) == "CRM unreachable (could not connect)"
    assert refused.value.retryable and not fake_crm.calls
    assert [entry["attempt"] for entry in logs if entry["event"] == "crm call retried"] == [1, 2]


async def test_recovers_when_the_outage_ends_between_retries(
    fake_crm: FakeCrm, transport: CrmTransport, location: Location
) -> None:
    patient = CrmTransport(
        fake_crm.url, retry=RetryPolicy(max_retries=5, backoff_base_s=0.05, max_wait_s=1.0)
    )
    client = CrmClient(patient, token=location.token, location_id=location.id)
    fake_crm.rate_limit(3, retry_after=None)
    try:
        assert await client.upsert_contact(email="e@example.com")
    finally:
        await patient.aclose()
    assert [c.status for c in fake_crm.calls] == [429, 429, 429, 200]


async def test_missing_version_header_is_refused_by_the_fake(
    fake_crm: FakeCrm, location: Location
) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=fake_crm.url) as http:
        answer = await http.get(
            "/contacts/",
            params={"locationId": location.id},
            headers={"Authorization": f"Bearer {location.token}"},
        )
    assert answer.status_code == 400
    assert answer.json()["message"] == "Version header was not found"


def test_retry_after_parses_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_crm_error_repr_is_plain() -> None:
    error = CrmError(500, "boom", retryable=True)
    assert "boom" in repr(error) and "retryable=True" in repr(error)


async def test_retry_after_as_an_http_date_is_honoured(
    fake_crm: FakeCrm, location: Location
) -> None:
    when = datetime.now(UTC) + timedelta(seconds=1)
    fake_crm.rate_limit(1, retry_after=format_datetime(when, usegmt=True))
    await location.client.get("/contacts/", {"locationId": location.id})
    assert [c.status for c in fake_crm.calls] == [429, 200]


async def test_a_slow_crm_times_out_and_only_reads_are_repeated(
    fake_crm: FakeCrm, location: Location
) -> None:
    impatient = CrmTransport(fake_crm.url, timeout_s=0.2, retry=RetryPolicy(1, 0.01, 1.0))
    client = CrmClient(impatient, token=location.token, location_id=location.id)
    fake_crm.hold()  # no answer ever comes in time
    try:
        with pytest.raises(CrmUnavailable) as read:
            await client.get("/contacts/", {"locationId": location.id})
        assert read.value.retryable and len(fake_crm.calls) == 2
        with pytest.raises(CrmUnavailable):
            await client.post("/contacts/", {"locationId": location.id, "email": "f@x.io"})
        assert len(fake_crm.calls) == 3  # the create was not sent twice
    finally:
        fake_crm.release()
        await impatient.aclose()


async def test_logs_never_carry_the_token(fake_crm: FakeCrm, location: Location) -> None:

    fake_crm.outage(503)
    with capture_logs() as logs, pytest.raises(CrmUnavailable):
        await location.client.get_contact("abc")
    assert any(entry["event"] == "crm call retried" for entry in logs)
    assert logs and location.token not in repr(logs)
