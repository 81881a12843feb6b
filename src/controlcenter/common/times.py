"""Times as the API writes them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

TimeSpec = Literal["auto", "seconds", "milliseconds", "microseconds"]


def iso(moment: datetime, timespec: TimeSpec = "milliseconds") -> str:
    """ISO 8601 in UTC with `Z`; by default with milliseconds, as JavaScript's toISOString()
    writes it. A naive time is taken as UTC (the database stores UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
