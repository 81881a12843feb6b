"""Custom-field values by key resolved to the ids HighLevel requires, cached per location."""

from __future__ import annotations

import pytest

from controlcenter.crm.custom_fields import CustomFieldIds
from controlcenter.crm.errors import CrmAuthError
from tests.crm.conftest import Location
from tests.fakes.clock import ManualClock
from tests.fakes.crm import FakeCrm


def lookups(fake: FakeCrm, location: Location) -> int:
    return len(fake.calls_to("GET", f"/locations/{location.id}/customFields"))


async def test_values_go_by_id_in_the_order_given_and_unknown_keys_are_reported(
    fake_crm: FakeCrm, location: Location
) -> None:
    size = fake_crm.add_custom_field(location.id, "Size", key="contact.size")
    city = fake_crm.add_custom_field(location.id, "City", key="contact.city")
    other = fake_crm.add_location()
    fake_crm.add_custom_field(other["id"], "Budget", key="contact.budget")
    resolved = await CustomFieldIds().values(
        location.client, {"contact.city": "Austin", "contact.budget": "1M", "contact.size": 10}
    )
    assert resolved.items == [
        {"id": city["id"], "field_value": "Austin"},
        {"id": size["id"], "field_value": 10},
    ]
    assert resolved.missing == ["contact.budget"]  # another location's field is not this one's


async def test_the_ids_are_kept_and_a_missing_key_rechecked_after_a_while(
    fake_crm: FakeCrm, location: Location
) -> None:
    fake_crm.add_custom_field(location.id, "Size", key="contact.size")
    clock = ManualClock()
    ids = CustomFieldIds(ttl_s=300.0, recheck_s=60.0, clock=clock)
    for _ in range(3):
        await ids.values(location.client, {"contact.size": 1})
    assert lookups(fake_crm, location) == 1
    created = fake_crm.add_custom_field(location.id, "New", key="contact.new")
    clock.advance(59.0)
    early = await ids.values(location.client, {"contact.new": "x"})  # fetched < recheck_s ago
    assert early.missing == ["contact.new"] and lookups(fake_crm, location) == 1
    clock.advance(1.0)
    found = await ids.values(location.client, {"contact.new": "x"})
    assert found.items == [{"id": created["id"], "field_value": "x"}] and not found.missing
    assert lookups(fake_crm, location) == 2
    clock.advance(299.0)
    await ids.values(location.client, {"contact.new": "y", "contact.size": 2})
    assert lookups(fake_crm, location) == 2  # all known now: kept until ttl_s
    clock.advance(1.0)
    await ids.values(location.client, {"contact.size": 3})
    assert lookups(fake_crm, location) == 3  # ttl_s after they were fetched


async def test_nothing_to_send_asks_nothing(fake_crm: FakeCrm, location: Location) -> None:
    resolved = await CustomFieldIds().values(location.client, {})
    assert resolved.items == [] and resolved.missing == []
    assert lookups(fake_crm, location) == 0


async def test_a_failed_lookup_is_the_crm_error(fake_crm: FakeCrm, location: Location) -> None:
    fake_crm.state.location_tokens.clear()  # the token no longer works
    with pytest.raises(CrmAuthError):
        await CustomFieldIds().values(location.client, {"contact.size": 1})
