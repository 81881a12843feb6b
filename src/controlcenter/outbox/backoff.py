"""Exponential backoff with full jitter (the AWS Architecture Blog's "Full Jitter").

Every retry waits a random time between zero and the exponential bound, so many jobs that
failed together (a CRM outage) do not all come back at the same moment.
"""

from __future__ import annotations

import random


def backoff_delay(
    attempts: int, *, base_s: float, cap_s: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after the `attempts`-th failed attempt (1 for the first failure)."""
    exponent = min(max(attempts - 1, 0), 62)  # 2**62 * base is far past any cap
    bound = min(cap_s, base_s * (2**exponent))
    return (rng or _rng).uniform(0.0, bound)


_rng = random.SystemRandom()
