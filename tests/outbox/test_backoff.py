from __future__ import annotations

import random

from controlcenter.common.retry import backoff_delay


def test_full_jitter_stays_under_the_exponential_bound() -> None:
    rng = random.Random(7)
    for attempts in range(1, 8):
        bound = min(100.0, 0.5 * 2 ** (attempts - 1))
        delays = [backoff_delay(attempts, base_s=0.5, cap_s=100.0, rng=rng) for _ in range(300)]
        assert all(0.0 <= delay <= bound for delay in delays)
        # Full jitter spreads over the whole range, not just near the bound.
        assert min(delays) < bound * 0.2 and max(delays) > bound * 0.8


def test_the_cap_holds_for_huge_attempt_counts() -> None:
    rng = random.Random(1)
    delays = [backoff_delay(10_000, base_s=2.0, cap_s=3600.0, rng=rng) for _ in range(200)]
    assert all(0.0 <= delay <= 3600.0 for delay in delays)
    assert max(delays) > 3000.0
