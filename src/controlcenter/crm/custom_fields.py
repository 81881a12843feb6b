"""Custom-field values by key, sent to HighLevel by id.

Every item schema of a contact body's `customFields` (CreateContactDto, UpsertContactDto,
UpdateContactDto) requires `id`. Callers know fields by their key (`contact.gci_last_12_months`),
so the location's contact custom fields are looked up once
(`GET /locations/{locationId}/customFields?model=contact`, operationId get-custom-fields) and
kept for a few minutes per location.

A key the location does not define cannot be sent: it is returned in `missing`, for the caller to
report, and the other values still go out (docs/outbox.md says why a sync does not fail on it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import TTLCache

from controlcenter.crm.client import CrmClient, segment
from controlcenter.crm.errors import CrmError

_MAX_LOCATIONS = 1024


@dataclass(frozen=True)
class CustomFieldValues:
    items: list[dict[str, Any]]  # `{id, field_value}`, ready for a contact body
    missing: list[str] = field(default_factory=list)  # keys with no field at the location


@dataclass
class _Known:
    ids: dict[str, str]  # fieldKey -> id
    fetched_at: float  # by the cache's clock


class CustomFieldIds:
    """fieldKey -> id per location, kept `ttl_s`; a key not found refetches at most every
    `recheck_s`, so a field the operator has just created is used within that time without a
    lookup per delivery while it is still missing. `clock` gives monotonic seconds."""

    def __init__(
        self,
        ttl_s: float = 300.0,
        recheck_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recheck_s = recheck_s
        self._clock = clock
        self._known: TTLCache[str, _Known] = TTLCache(
            maxsize=_MAX_LOCATIONS, ttl=ttl_s, timer=clock
        )

    async def values(self, client: CrmClient, by_key: Mapping[str, Any]) -> CustomFieldValues:
        """The values of `by_key` as `{id, field_value}` items, in the order given."""
        if not by_key:
            return CustomFieldValues(items=[])
        ids = await self._ids(client, set(by_key))
        items = [
            {"id": ids[key], "field_value": value} for key, value in by_key.items() if key in ids
        ]
        return CustomFieldValues(items=items, missing=[key for key in by_key if key not in ids])

    def forget(self, location_id: str) -> None:
        self._known.pop(location_id, None)

    async def _ids(self, client: CrmClient, wanted: set[str]) -> dict[str, str]:
        known = self._known.get(client.location_id)
        if known is not None and (
            wanted <= known.ids.keys() or self._clock() - known.fetched_at < self._recheck_s
        ):
            return known.ids
        ids = await self._fetch(client)
        self._known[client.location_id] = _Known(ids, self._clock())
        return ids

    @staticmethod
    async def _fetch(client: CrmClient) -> dict[str, str]:
        path = f"/locations/{segment(client.location_id)}/customFields"
        answer = await client.get(path, {"model": "contact"})
        fields = answer.get("customFields") if isinstance(answer, dict) else None
        if not isinstance(fields, list):
            raise CrmError(None, "CRM answer without 'customFields'")
        return {
            entry["fieldKey"]: entry["id"]
            for entry in fields
            if isinstance(entry, dict)
            and isinstance(entry.get("fieldKey"), str)
            and isinstance(entry.get("id"), str)
        }
