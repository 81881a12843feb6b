"""What a save writes, built before its transaction opens (`service.save_onboarding`) and
written by the database's own path (`sqlite_save`, `postgres_save`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class SaveValues:
    user_id: str
    brokerage: str | None  # None: the user's brokerage is left as it is
    now: datetime
    record_id: str  # a new record's id (an existing record keeps its own)
    values: Mapping[str, Any]  # the given fields by name, in their stored form
    jobs: Sequence[Mapping[str, Any]]  # `outbox.enqueue.job_values`, all with the same columns
