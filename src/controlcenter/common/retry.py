"""One retry policy for every outside call and every outbox job (tenacity).

Exponential backoff with full jitter (the AWS Architecture Blog's "Full Jitter"): after the
n-th failure, a random wait between zero and `base * 2**(n-1)`, capped, so that many callers
that failed together (a CRM outage) do not all come back at the same moment. When the server
said how long to wait (`Retry-After`), that wait is used instead.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from tenacity import RetryCallState, Retrying
from tenacity.wait import wait_base, wait_exponential

_rng = random.SystemRandom()


def backoff_delay(
    attempts: int, *, base_s: float, cap_s: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after the `attempts`-th failed attempt (1 for the first failure)."""
    state = RetryCallState(Retrying(), None, (), {})
    state.attempt_number = max(attempts, 1)
    bound = wait_exponential(multiplier=base_s, max=cap_s)(state)
    return (rng or _rng).uniform(0.0, bound)


class WaitRetryAfter(wait_base):
    """The wait the failed attempt's exception asked for (`retry_after`, seconds), else the
    backoff of `backoff_delay`."""

    def __init__(self, *, base_s: float, cap_s: float) -> None:
        self.base_s = base_s
        self.cap_s = cap_s

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        asked = getattr(error, "retry_after", None)
        if isinstance(asked, int | float):
            return float(asked)
        return backoff_delay(retry_state.attempt_number, base_s=self.base_s, cap_s=self.cap_s)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
