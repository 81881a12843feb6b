"""Read and upsert a user's onboarding record, with its side effects as outbox jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlalchemy import select

from controlcenter.auth.models import User
from controlcenter.db import Database, new_id, utcnow
from controlcenter.onboarding.crm_sync import SYNC_USER, TAG_HIGH_GCI, TAG_ONBOARDING_COMPLETE
from controlcenter.onboarding.models import ARRAY_FIELDS, FIELDS, Onboarding
from controlcenter.onboarding.schemas import OnboardingInput
from controlcenter.outbox.enqueue import enqueue

HIGH_GCI_MARKERS = ("100", "250")


class UserGoneError(Exception):
    """The session's user was deleted between authentication and the write."""


async def get_onboarding(db: Database, user_id: str) -> Onboarding | None:
    async with db.read() as session:
        return await session.scalar(select(Onboarding).where(Onboarding.userId == user_id))


def encode_array(values: list[str]) -> str:
    # Compact, non-ASCII kept: the same text JSON.stringify() produces.
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def is_high_gci(gci: str) -> bool:
    return any(marker in gci for marker in HIGH_GCI_MARKERS)


async def save_onboarding(db: Database, user_id: str, data: OnboardingInput) -> Onboarding:
    """Create or update the record with the given fields only, all in one transaction.

    The record, the user's brokerage and the three outbox jobs commit together or not at all.
    """
    given: Mapping[str, object] = data
    async with db.write() as session:
        # Locking the user row serialises concurrent saves of one user on PostgreSQL, so two
        # first saves cannot both insert (SQLite writes are serialised already).
        user = await session.scalar(select(User).where(User.id == user_id).with_for_update())
        if user is None:
            raise UserGoneError(user_id)
        row = await session.scalar(select(Onboarding).where(Onboarding.userId == user_id))
        now = utcnow()
        if row is None:
            row = Onboarding(id=new_id(), userId=user_id, createdAt=now)
            session.add(row)
        for name in FIELDS:
            if name in given:
                value = given[name]
                if name in ARRAY_FIELDS:
                    assert isinstance(value, list)
                    value = encode_array(value)
                setattr(row, name, value)
        # A save is an event (it tags and syncs the user) even when no answer changed.
        row.updatedAt = now
        brokerage = data.get("brokerageName")
        if brokerage:
            user.brokerage = brokerage
        # SPEC 4.4: judged on the request's value, "empty when absent", not the stored one.
        gci = data.get("gciLast12Months", "")
        enqueue(session, TAG_ONBOARDING_COMPLETE, {"userId": user_id})
        if is_high_gci(gci):
            enqueue(session, TAG_HIGH_GCI, {"userId": user_id, "gci": gci})
        enqueue(session, SYNC_USER, {"userId": user_id})
    return row
