"""One onboarding record per user."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Column, ForeignKey, String, Text, inspect
from sqlalchemy.orm import Mapped, mapped_column

from controlcenter.db import Base, UTCDateTime, new_id, utcnow

STRING_FIELDS = (
    "yearsInBusiness",
    "gciLast12Months",
    "currentCrmName",
    "leadSourceName",
    "leadsPerMonthTarget",
)
BOOLEAN_FIELDS = ("usingOtherCrm", "hasLeadSource", "wantsMoreLeads")
ARRAY_FIELDS = (
    "crmPainPoints",
    "goalsSelected",
    "leadTypesDesired",
    "channelsSelected",
    "systemsToConnect",
)
# The fields' documented order, which is also the order of the returned record.
FIELDS = (
    "yearsInBusiness",
    "gciLast12Months",
    "usingOtherCrm",
    "currentCrmName",
    "crmPainPoints",
    "goalsSelected",
    "hasLeadSource",
    "leadSourceName",
    "wantsMoreLeads",
    "leadTypesDesired",
    "leadsPerMonthTarget",
    "channelsSelected",
    "systemsToConnect",
)
# The record as the API answers it, in its order, by the model's attribute names.
RECORD = ("id", "userId", *FIELDS, "createdAt", "updatedAt")


class Onboarding(Base):
    __tablename__ = "onboarding"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    userId: Mapped[str] = mapped_column(
        "user_id", ForeignKey("users.id", ondelete="CASCADE"), unique=True
    )
    yearsInBusiness: Mapped[str | None] = mapped_column(Text, default=None)
    gciLast12Months: Mapped[str | None] = mapped_column(Text, default=None)
    usingOtherCrm: Mapped[bool | None] = mapped_column(Boolean, default=None)
    currentCrmName: Mapped[str | None] = mapped_column(Text, default=None)
    crmPainPoints: Mapped[str | None] = mapped_column(Text, default=None)
    goalsSelected: Mapped[str | None] = mapped_column(Text, default=None)
    hasLeadSource: Mapped[bool | None] = mapped_column(Boolean, default=None)
    leadSourceName: Mapped[str | None] = mapped_column(Text, default=None)
    wantsMoreLeads: Mapped[bool | None] = mapped_column(Boolean, default=None)
    leadTypesDesired: Mapped[str | None] = mapped_column(Text, default=None)
    leadsPerMonthTarget: Mapped[str | None] = mapped_column(Text, default=None)
    channelsSelected: Mapped[str | None] = mapped_column(Text, default=None)
    systemsToConnect: Mapped[str | None] = mapped_column(Text, default=None)
    createdAt: Mapped[datetime] = mapped_column("created_at", UTCDateTime(), default=utcnow)
    updatedAt: Mapped[datetime] = mapped_column(
        "updated_at", UTCDateTime(), default=utcnow, onupdate=utcnow
    )


# `RECORD`'s columns, which the read and the upsert answer in that order.
RECORD_COLUMNS: tuple[Column[Any], ...] = tuple(
    inspect(Onboarding).columns[name] for name in RECORD
)
