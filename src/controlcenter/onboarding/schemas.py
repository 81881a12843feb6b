"""The onboarding request (SPEC 2.5, 4.4) and the record as callers see it (CONTRACT 6)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import ConfigDict, StringConstraints, TypeAdapter, with_config
from typing_extensions import TypedDict

from controlcenter.onboarding.models import FIELDS, Onboarding
from controlcenter.validation import StoredStr

# users.brokerage is VARCHAR(500): longer is refused as invalid rather than failing on PostgreSQL.
BROKERAGE_MAX = 500


@with_config(ConfigDict(strict=True, extra="ignore"))
class OnboardingInput(TypedDict, total=False):
    """Every field optional; a key that is present must have exactly its type (no coercion,
    null included). A TypedDict keeps only the keys that were sent, which is what a partial
    upsert needs to tell "absent" from "given"."""

    yearsInBusiness: StoredStr
    gciLast12Months: StoredStr
    usingOtherCrm: bool
    currentCrmName: StoredStr
    crmPainPoints: list[StoredStr]
    goalsSelected: list[StoredStr]
    hasLeadSource: bool
    leadSourceName: StoredStr
    wantsMoreLeads: bool
    leadTypesDesired: list[StoredStr]
    leadsPerMonthTarget: StoredStr
    channelsSelected: list[StoredStr]
    systemsToConnect: list[StoredStr]
    brokerageName: Annotated[StoredStr, StringConstraints(max_length=BROKERAGE_MAX)]


ONBOARDING_INPUT: TypeAdapter[OnboardingInput] = TypeAdapter(OnboardingInput)


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, the form JavaScript's toISOString() gives."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(row: Onboarding) -> dict[str, Any]:
    """`{id, userId, <13 fields in SPEC order>, createdAt, updatedAt}`; unset fields are null."""
    return {
        "id": row.id,
        "userId": row.userId,
        **{name: getattr(row, name) for name in FIELDS},
        "createdAt": iso(row.createdAt),
        "updatedAt": iso(row.updatedAt),
    }
