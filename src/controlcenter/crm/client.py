"""A CRM client bound to one location and one credential.

    client = CrmClient(transport, token=private_token, location_id=location_id)
    contact = await client.upsert_contact(email="a@b.c", firstName="Ann")
    await client.add_tags(contact["id"], ["onboarded"])

Every call is scoped to `location_id`: the client puts it where each endpoint expects it,
and callers never pass their own.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol
from urllib.parse import quote

from controlcenter.crm.errors import CrmAuthError, CrmError
from controlcenter.crm.transport import CrmTransport, RateGate


class TokenSource(Protocol):
    async def token(self) -> str: ...

    def invalidate(self) -> bool:
        """Forget a cached token; True when a fresh one can be obtained."""
        ...


class StaticToken:
    """A private integration token (or any fixed bearer token)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    def invalidate(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "StaticToken(••••)"


class AgencyLocationToken:
    """A location token exchanged from the agency credential, cached by the transport."""

    def __init__(
        self, transport: CrmTransport, agency_key: str, company_id: str, location_id: str
    ) -> None:
        self._cache = transport.location_tokens
        self._args = (agency_key, company_id, location_id)

    async def token(self) -> str:
        return await self._cache.get(*self._args)

    def invalidate(self) -> bool:
        self._cache.invalidate(*self._args)
        return True

    def __repr__(self) -> str:
        return f"AgencyLocationToken(location_id={self._args[2]!r})"


def segment(value: str) -> str:
    """One path segment: an id from a model must never walk to another path."""
    return quote(value, safe="")


class CrmClient:
    def __init__(
        self,
        transport: CrmTransport,
        *,
        token: str | TokenSource,
        location_id: str,
        gate: RateGate | None = None,
    ) -> None:
        self._transport = transport
        self._token: TokenSource = StaticToken(token) if isinstance(token, str) else token
        self.location_id = location_id
        self._gate = gate  # the location's rate limit, when the caller keeps it

    def __repr__(self) -> str:
        return f"CrmClient(location_id={self.location_id!r})"

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        """One call with this client's credential; a rejected cached token is renewed once."""
        call = partial(
            self._transport.request,
            method,
            path,
            params=params,
            json=json,
            idempotent=idempotent,
            gate=self._gate,
        )
        try:
            return await call(token=await self._token.token())
        except CrmAuthError as exc:
            if exc.status != 401 or not self._token.invalidate():
                raise
        return await call(token=await self._token.token())

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any, *, idempotent: bool = False) -> Any:
        return await self.request("POST", path, json=body, idempotent=idempotent)

    async def put(self, path: str, body: Any) -> Any:
        return await self.request("PUT", path, json=body)

    async def delete(self, path: str, body: Any = None) -> Any:
        return await self.request("DELETE", path, json=body)

    # -- contacts (what the operator's onboarding delivery needs) --------------------------

    async def upsert_contact(self, **fields: Any) -> dict[str, Any]:
        """Create or update the contact matched by e-mail (or phone); the contact."""
        body = {**fields, "locationId": self.location_id}
        answer = await self.post("/contacts/upsert", body, idempotent=True)
        return _contact(answer)

    async def get_contact(self, contact_id: str) -> dict[str, Any]:
        return _contact(await self.get(f"/contacts/{segment(contact_id)}"))

    async def update_contact(self, contact_id: str, **fields: Any) -> dict[str, Any]:
        return _contact(await self.put(f"/contacts/{segment(contact_id)}", fields))

    async def add_tags(self, contact_id: str, tags: list[str]) -> list[str]:
        """Add tags, keeping the contact's existing ones; the contact's tags afterwards."""
        answer = await self.post(
            f"/contacts/{segment(contact_id)}/tags", {"tags": tags}, idempotent=True
        )
        return list(_field(answer, "tags", list))

    async def remove_tags(self, contact_id: str, tags: list[str]) -> list[str]:
        answer = await self.delete(f"/contacts/{segment(contact_id)}/tags", {"tags": tags})
        return list(_field(answer, "tags", list))


def _contact(answer: Any) -> dict[str, Any]:
    contact: dict[str, Any] = _field(answer, "contact")
    return contact


def _field(answer: Any, name: str, kind: type = dict) -> Any:
    value = answer.get(name) if isinstance(answer, dict) else None
    if not isinstance(value, kind):
        raise CrmError(None, f"CRM answer without {name!r}")
    return value
