"""The operator's CRM location at the fake, and its settings saved as the administrator would."""

from __future__ import annotations

from dataclasses import dataclass

from controlcenter.auth.models import UserRecord
from controlcenter.onboarding.crm_sync import TAG_ONBOARDING_COMPLETE
from tests.conftest import RunningServer, UserFactory
from tests.dbtools import writing
from tests.fakes.crm import FakeCrm, define_onboarding_fields
from tests.outbox.conftest import add_job

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


async def save_settings(server: RunningServer, values: dict[str, str], user_id: str) -> None:
    await server.db.run_write(server.settings.save, values, user_id)


async def queue_tag_jobs(
    server: RunningServer, users: UserFactory, fake: FakeCrm, count: int, prefix: str = "broker"
) -> tuple[Operator, list[UserRecord]]:
    """The operator's settings saved, and `count` brokers each with an onboarding-complete tag
    job queued (plain rows: these brokers never sign in, so no password hashing slows tests)."""
    operator = operator_location(fake)
    admin = await users.create("super_admin")
    await save_settings(server, operator.settings(), admin.id)
    brokers = [
        UserRecord(email=f"{prefix}{n}@example.com", password_hash="-") for n in range(count)
    ]
    async with writing(server.db) as db:
        db.add_all(brokers)
    for broker in brokers:
        await add_job(server.db, TAG_ONBOARDING_COMPLETE, {"userId": broker.id})
    return operator, brokers
