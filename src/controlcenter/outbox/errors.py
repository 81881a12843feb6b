"""How a delivery ends when it does not succeed: each outcome tells the worker what to do next."""

from __future__ import annotations

from collections.abc import Iterable

from controlcenter.db import utcnow

RATE_LIMITED = 429


class MissingSettings(Exception):
    """The operator has not configured what delivery needs yet.

    The job stays pending, is not counted as an attempt and never dies of it: it is checked
    again later and delivered once the settings are saved.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        super().__init__("missing settings: " + ", ".join(self.names))


class UnusableSettings(MissingSettings):
    """A setting delivery needs is stored but cannot be used as it is (a
    credential that is not printable ASCII): the job waits exactly as for a missing one."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__([name])
        self.args = (f"unusable setting: {name} ({reason})",)

    def __str__(self) -> str:
        return str(self.args[0])


class DeliveryError(Exception):
    """The delivery failed; the message is logged and kept as `last_error` (never a secret).

    `retryable` is what the remote side said (a 5xx, a 429, no answer); the worker retries
    both kinds with backoff until the job's maximum age (docs/outbox.md says why). A 429
    with `retry_after` is the CRM's rate limit (ours or its own): the job comes back after
    that wait, and it does not count as an attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.raised_at = utcnow()  # what `retry_after` counts from
        super().__init__(message)

    @property
    def rate_limited(self) -> bool:
        return self.status == RATE_LIMITED and self.retry_after is not None


class PermanentError(Exception):
    """Nothing can ever deliver this job (an unknown kind, a user that no longer exists):
    it is marked dead at once and kept for inspection."""
