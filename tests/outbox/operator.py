"""The operator's CRM location at the fake, and its settings saved as the administrator would."""

from __future__ import annotations

from dataclasses import dataclass

from controlcenter.services import Services
from tests.fakes.crm import FakeCrm

COMPLETE_TAG = "onboarding-complete"
HIGH_GCI_TAG = "high-gci"


@dataclass
class Operator:
    location_id: str
    token: str

    def settings(self) -> dict[str, str]:
        return {
            "crmOwnerLocationId": self.location_id,
            "crmPrivateToken": self.token,
            "tagOnboardingComplete": COMPLETE_TAG,
            "tagHighGCI": HIGH_GCI_TAG,
        }


def operator_location(fake: FakeCrm) -> Operator:
    location_id = fake.add_location()["id"]
    return Operator(location_id=location_id, token=fake.private_token(location_id))


async def save_settings(services: Services, values: dict[str, str], user_id: str) -> None:
    async with services.db.write() as db:
        await services.settings.save(db, values, user_id)
