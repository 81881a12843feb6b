"""The onboarding request and the record as callers see it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    Field,
    StringConstraints,
    TypeAdapter,
    create_model,
    with_config,
)
from typing_extensions import TypedDict

from controlcenter.common.times import iso
from controlcenter.onboarding.models import ARRAY_FIELDS, BOOLEAN_FIELDS, FIELDS
from controlcenter.web.openapi_doc import schema_extra
from controlcenter.web.validation import STORABLE

# users.brokerage is VARCHAR(500): longer is refused as invalid rather than failing on PostgreSQL.
BROKERAGE_MAX = 500
# Everything a broker types is bounded before it is stored and queued for the CRM.
TEXT_MAX = 10_000
ITEMS_MAX = 100
ITEM_MAX = 1_000
Text = Annotated[str, StringConstraints(max_length=TEXT_MAX), STORABLE]
Items = Annotated[
    list[Annotated[str, StringConstraints(max_length=ITEM_MAX), STORABLE]],
    Field(max_length=ITEMS_MAX),
]


_EXAMPLE = {
    "yearsInBusiness": "12",
    "gciLast12Months": "250000",
    "usingOtherCrm": True,
    "goalsSelected": ["more leads"],
    "brokerageName": "Harbor Commercial",
}


@with_config(schema_extra(_EXAMPLE, strict=True, extra="ignore"))
class OnboardingInput(TypedDict, total=False):
    """Every field optional; a key that is present must have exactly its type (no coercion,
    null included). A TypedDict keeps only the keys that were sent, which is what a partial
    upsert needs to tell "absent" from "given"."""

    yearsInBusiness: Text
    gciLast12Months: Text
    usingOtherCrm: bool
    currentCrmName: Text
    crmPainPoints: Items
    goalsSelected: Items
    hasLeadSource: bool
    leadSourceName: Text
    wantsMoreLeads: bool
    leadTypesDesired: Items
    leadsPerMonthTarget: Text
    channelsSelected: Items
    systemsToConnect: Items
    brokerageName: Annotated[str, StringConstraints(max_length=BROKERAGE_MAX), STORABLE]


ONBOARDING_INPUT: TypeAdapter[OnboardingInput] = TypeAdapter(OnboardingInput)


def record(stored: Mapping[str, Any]) -> dict[str, Any]:
    """`{id, userId, <13 fields in `FIELDS` order>, createdAt, updatedAt}` from the stored values
    by `RECORD`'s names (already in that order); unset fields are null."""
    return {**stored, "createdAt": iso(stored["createdAt"]), "updatedAt": iso(stored["updatedAt"])}


def _stored_type(name: str) -> Any:
    if name in BOOLEAN_FIELDS:
        return (bool | None, ...)
    if name in ARRAY_FIELDS:
        return (str | None, Field(description="a JSON-encoded array"))
    return (str | None, ...)


# The record as `record` answers it, from the one list of fields (for the interface description).
OnboardingRecord: type[BaseModel] = create_model(
    "OnboardingRecord",
    id=(str, ...),
    userId=(str, ...),
    **{name: _stored_type(name) for name in FIELDS},
    createdAt=(AwareDatetime, ...),
    updatedAt=(AwareDatetime, ...),
)


class OnboardingAnswer(BaseModel):
    onboarding: OnboardingRecord | None  # built by create_model


class SavedOnboarding(BaseModel):
    success: Literal[True]
    onboarding: OnboardingRecord
