"""Locations (HighLevel app `locations`, Version 2021-07-28): the broker's own sub-account."""

from __future__ import annotations

from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import crm_tool, path, schema


def _location(crm: CrmClient) -> str:
    return path("/locations/{locationId}", {"locationId": crm.location_id})


@crm_tool(
    "locations_get-location",
    "get-location",
    what="location",
    description=(
        "Get the broker's own CRM account (sub-account): business name, address, e-mail, "
        "phone, time zone. Returns `location`."
    ),
    schema=schema({}),
)
async def get_location(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_location(crm))


@crm_tool(
    "locations_get-custom-fields",
    "get-custom-fields",
    what="location",
    description=(
        "List the custom fields defined in the CRM (id, name, fieldKey, dataType). Use it to "
        "understand custom field ids in contacts. Returns `customFields`."
    ),
    schema=schema({}),
)
async def get_custom_fields(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_location(crm) + "/customFields")


@crm_tool(
    "locations_get-tags",
    "get-location-tags",
    what="location",
    description=(
        "List the tags used in the CRM account. Use it to pick existing tag names before "
        "tagging. Returns `tags` (id, name)."
    ),
    schema=schema({}),
)
async def get_location_tags(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(_location(crm) + "/tags")


TOOLS = (get_location, get_custom_fields, get_location_tags)
