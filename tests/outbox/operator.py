"""The operator's CRM location at the fake, and its settings saved as the administrator would."""

from __future__ import annotations

from dataclasses import dataclass

from controlcenter.web.deps import Services
from tests.fakes.crm import FakeCrm, define_onboarding_fields

COMPLETE_TAG = "onboarding-complete"
HIGH_GCI_TAG = "high-gci"


REFERRAL_KEY = "contact.referral_source"  # a field of the operator's own, not onboarding's


@dataclass
class Operator:
    location_id: str
    token: str
    field_ids: dict[str, str]  # fieldKey -> id of the custom fields defined at the location

    def settings(self) -> dict[str, str]:
        return {
            "crmOwnerLocationId": self.location_id,
            "crmPrivateToken": self.token,
            "tagOnboardingComplete": COMPLETE_TAG,
            "tagHighGCI": HIGH_GCI_TAG,
        }


def operator_location(fake: FakeCrm, *, fields: bool = True) -> Operator:
    """The operator's location, with the custom fields docs/outbox.md asks the operator to
    create (one per onboarding answer) unless `fields` is False."""
    location_id = fake.add_location()["id"]
    ids = define_onboarding_fields(fake, location_id) if fields else {}
    ids[REFERRAL_KEY] = fake.add_custom_field(location_id, "Referral", key=REFERRAL_KEY)["id"]
    return Operator(location_id=location_id, token=fake.private_token(location_id), field_ids=ids)


async def save_settings(services: Services, values: dict[str, str], user_id: str) -> None:
    async with services.db.write() as db:
        await services.settings.save(db, values, user_id)
