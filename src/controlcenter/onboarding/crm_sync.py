"""Onboarding's side effects in the operator's own CRM location: the three
kinds of outbox job, and the rules of their delivery (which settings, which fields, which tags).

Every handler reads what it needs when it runs, not when the job was written: the settings
(so a job waiting for them is delivered once they are saved) and the broker's data (so a sync
sends the latest answers). Each is idempotent: the contact is upserted by e-mail and tags go
through the tags endpoint, which adds to the contact's set and keeps the tags it has.

docs/outbox.md lists the field mapping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlcenter.admin_settings import names as setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.admin_settings.usable import credential_problem
from controlcenter.auth.models import UserRecord
from controlcenter.common.logs import get_logger
from controlcenter.common.secrets import MASK, redact
from controlcenter.crm.client import CrmClient
from controlcenter.crm.custom_fields import CustomFieldIds
from controlcenter.crm.errors import CrmError, CrmRateLimited
from controlcenter.crm.rate_limit import LocationRateLimiter
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database
from controlcenter.onboarding.models import ARRAY_FIELDS, BOOLEAN_FIELDS, FIELDS, Onboarding
from controlcenter.outbox.errors import (
    DeliveryError,
    MissingSettings,
    PermanentError,
    UnusableSettings,
)
from controlcenter.outbox.kinds import JobKind
from controlcenter.outbox.worker import ClaimedJob, Handler

log = get_logger(__name__)

TAG_ONBOARDING_COMPLETE = JobKind("crm.tag_onboarding_complete")  # payload: {"userId"}
TAG_HIGH_GCI = JobKind("crm.tag_high_gci")  # payload: {"userId", "gci"}
SYNC_USER = JobKind("crm.sync_user")  # payload: {"userId"}
KINDS = (TAG_ONBOARDING_COMPLETE, TAG_HIGH_GCI, SYNC_USER)

LOCATION = setting.OWNER_LOCATION_ID
TOKEN = setting.PRIVATE_TOKEN
TAG_COMPLETE = setting.TAG_ONBOARDING_COMPLETE
TAG_HIGH = setting.TAG_HIGH_GCI

GCI_FIELD = "gciLast12Months"
_WORD_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z0-9])|(?<=[0-9])(?=[A-Za-z])")


def custom_field_key(field: str) -> str:
    """The HighLevel key of the custom field that receives an onboarding answer:
    `gciLast12Months` -> `contact.gci_last_12_months` (the operator creates these fields once;
    docs/outbox.md lists them)."""
    return "contact." + _WORD_BOUNDARY.sub("_", field).lower()


@dataclass(frozen=True)
class Broker:
    email: str
    name: str
    brokerage: str | None
    answers: dict[str, Any]


@dataclass(frozen=True)
class Part:
    """What one job delivers: a tag (by the setting naming it), the high-GCI value it passes,
    or every answer (a sync)."""

    job: ClaimedJob
    tag: SettingName | None = None
    gci: str | None = None
    sync: bool = False

    @property
    def needed(self) -> tuple[SettingName, ...]:
        return (LOCATION, TOKEN, *((self.tag,) if self.tag else ()))


class CrmSync:
    """The handlers of the three kinds. Builds one operator client per delivery from the
    settings of that moment."""

    def __init__(
        self,
        db: Database,
        settings: SettingsStore,
        crm: CrmTransport,
        limiter: LocationRateLimiter | None = None,
    ) -> None:
        self._db = db
        self._settings = settings
        self._crm = crm
        self._limiter = limiter  # the CRM's rate limit per location, shared by the processes
        self._field_ids = CustomFieldIds()

    def handlers(self) -> dict[str, Handler]:
        return {
            TAG_ONBOARDING_COMPLETE: self.tag_onboarding_complete,
            TAG_HIGH_GCI: self.tag_high_gci,
            SYNC_USER: self.sync_user,
        }

    async def tag_onboarding_complete(self, job: ClaimedJob) -> None:
        await self._deliver(Part(job, tag=TAG_COMPLETE))

    async def tag_high_gci(self, job: ClaimedJob) -> None:
        gci = job.payload.get("gci")
        # The value that earned the tag travels with it, in the GCI custom field.
        await self._deliver(Part(job, tag=TAG_HIGH, gci=gci if isinstance(gci, str) else None))

    async def sync_user(self, job: ClaimedJob) -> None:
        await self._deliver(Part(job, sync=True))

    async def _deliver(self, part: Part) -> None:
        """The part delivered, or MissingSettings while its settings are not all there."""
        values = await self._settings.get_many((LOCATION, TOKEN, TAG_COMPLETE, TAG_HIGH))
        problem = _unready(values, part)
        if problem is not None:
            raise problem
        await self._send(part, values)

    async def _send(self, part: Part, values: dict[str, str]) -> None:
        """The contact upserted with the identity, the high-GCI value and, for a sync, every
        answer that is set (read now, so the latest answers go), then the tag, added by the
        tags call, which keeps the contact's other tags (the upsert's `tags` would replace
        them)."""
        token, location = values[TOKEN].strip(), values[LOCATION].strip()
        gate = self._limiter.gate(location) if self._limiter is not None else None
        client = CrmClient(self._crm, token=token, location_id=location, gate=gate)
        with _crm_errors(token):
            if gate is not None:
                await gate.take_first()
            broker = await self._broker(part.job)
            fields = _identity(broker)
            custom = {custom_field_key(GCI_FIELD): part.gci} if part.gci else {}
            if part.sync:
                custom.update({custom_field_key(name): v for name, v in broker.answers.items()})
            if custom:
                resolved = await self._field_ids.values(client, custom)
                if resolved.items:
                    fields["customFields"] = resolved.items
                _report_missing(part, broker, set(resolved.missing), location)
            contact = await client.upsert_contact(**fields)
            if part.tag:
                await client.add_tags(_contact_id(contact), [values[part.tag].strip()])

    async def _broker(self, job: ClaimedJob) -> Broker:
        user_id = job.payload.get("userId")
        if not isinstance(user_id, str):
            raise PermanentError("payload without userId")
        return await self._db.run_read(_read_broker, user_id)


def _read_broker(session: Session, user_id: str) -> Broker:
    """The user and their answers; PermanentError when the user no longer exists."""
    user = session.get(UserRecord, user_id)
    if user is None:
        raise PermanentError(f"user {user_id} no longer exists")
    record = session.scalar(select(Onboarding).where(Onboarding.userId == user_id))
    return Broker(
        email=user.email,
        name=user.name,
        brokerage=user.brokerage,
        answers=_answers(record) if record is not None else {},
    )


def _unready(values: dict[str, str], part: Part) -> MissingSettings | None:
    """Why `part` cannot be delivered with these settings, or None."""
    missing = [name for name in part.needed if not values.get(name, "").strip()]
    if missing:
        return MissingSettings(missing)
    problem = credential_problem(values[TOKEN].strip())
    if problem is not None:
        # It could never travel in the Authorization header: wait for a usable one.
        return UnusableSettings(TOKEN, problem)
    return None


def _report_missing(part: Part, broker: Broker, missing: set[str], location: str) -> None:
    """A value whose key the location does not define is left out and reported with the job
    that sent it, never retried: the contact and its tag are still written (outbox.md)."""
    keys = [custom_field_key(GCI_FIELD)] if part.gci else []
    if part.sync:
        keys = [custom_field_key(name) for name in broker.answers]
    if lost := [key for key in keys if key in missing]:
        log.warning(
            "crm custom fields missing",
            job_id=part.job.id,
            kind=part.job.kind,
            location_id=location,
            keys=lost,
        )


def _identity(broker: Broker) -> dict[str, Any]:
    """Who the contact is: matched by e-mail; name and brokerage only when known."""
    fields: dict[str, Any] = {"email": broker.email}
    if broker.name.strip():
        fields["name"] = broker.name.strip()
    if broker.brokerage and broker.brokerage.strip():
        fields["companyName"] = broker.brokerage.strip()
    return fields


def _answers(record: Onboarding) -> dict[str, Any]:
    """The answers that are set, in CRM form: lists for the arrays, Yes/No for booleans."""
    answers: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(record, name)
        if value is None:
            continue
        if name in ARRAY_FIELDS:
            try:
                value = json.loads(value)
            except ValueError:
                value = [value]
        elif name in BOOLEAN_FIELDS:
            value = "Yes" if value else "No"
        answers[name] = value
    return answers


def _contact_id(contact: dict[str, Any]) -> str:
    contact_id = contact.get("id")
    if not isinstance(contact_id, str) or not contact_id:
        raise DeliveryError("CRM upsert answered without a contact id")
    return contact_id


@contextmanager
def _crm_errors(token: str) -> Iterator[None]:
    """CrmError as the worker's DeliveryError; the token is redacted even if echoed back."""
    try:
        yield
    except CrmError as exc:
        raise DeliveryError(
            redact(str(exc), token, mask=MASK),
            retryable=exc.retryable,
            status=exc.status,
            retry_after=exc.retry_after if isinstance(exc, CrmRateLimited) else None,
        ) from exc
