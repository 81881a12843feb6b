"""The fake CRM merges custom fields as HighLevel does (the delivery tests depend on it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes.crm import FakeCrm
from tests.outbox.operator import REFERRAL_KEY, Operator, operator_location


@pytest.fixture
def location(fake_crm: FakeCrm) -> Operator:
    return operator_location(fake_crm)


@pytest.fixture
async def http(fake_crm: FakeCrm, location: Operator) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {location.token}", "Version": "2021-07-28"}
    async with httpx.AsyncClient(base_url=fake_crm.url, headers=headers, timeout=5) as client:
        yield client


async def test_upsert_and_update_change_only_the_custom_fields_they_send(
    http: httpx.AsyncClient, fake_crm: FakeCrm, location: Operator
) -> None:
    ids = location.field_ids
    size, years, referral = (
        ids["contact.gci_last_12_months"],
        ids["contact.years_in_business"],
        ids[REFERRAL_KEY],
    )
    contact = fake_crm.add_contact(
        location.location_id,
        email="dana@example.com",
        tags=["vip"],
        customFields=[{"id": referral, "field_value": "one"}, {"id": size, "field_value": "10"}],
    )
    upsert = await http.post(
        "/contacts/upsert",
        json={
            "locationId": location.location_id,
            "email": "dana@example.com",
            "customFields": [
                {"id": size, "field_value": "20"},
                {"id": years, "key": "contact.years_in_business", "field_value": "5"},
                {"id": "notAFieldHere", "field_value": "ignored"},
            ],
        },
    )
    assert upsert.status_code == 200 and upsert.json()["new"] is False
    update = await http.put(
        f"/contacts/{contact['id']}",
        json={"customFields": [{"id": referral, "field_value": "two"}], "tags": ["renewal"]},
    )
    assert update.status_code == 200
    stored = fake_crm.contact(contact["id"]) or {}
    assert stored["customFields"] == [  # answered as CustomFieldSchema: {id, value}
        {"id": referral, "value": "two"},
        {"id": size, "value": "20"},
        {"id": years, "value": "5"},
    ]
    assert stored["tags"] == ["renewal"]  # tags, unlike custom fields, are replaced


async def test_custom_fields_without_an_id_are_refused(
    http: httpx.AsyncClient, location: Operator
) -> None:
    response = await http.post(
        "/contacts/upsert",
        json={
            "locationId": location.location_id,
            "email": "dana@example.com",
            "customFields": [{"key": "contact.size", "field_value": "orphan"}],
        },
    )
    assert response.status_code == 422
    assert response.json() == {
        "statusCode": 422,
        "message": ["customFields.0.id should not be empty"],
        "error": "Unprocessable Entity",
    }
