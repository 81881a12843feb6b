"""How a CRM call fails: one exception type the callers (tools, outbox) can reason about."""

from __future__ import annotations


class CrmError(Exception):
    """A failed CRM call.

    `status` is the HTTP status (None when no answer came back), `message` the API's own
    explanation (never a credential), `retryable` whether the same call may succeed later
    (rate limit, outage), and `retry_after` the seconds the API asked to wait, when it did.
    """

    def __init__(
        self,
        status: int | None,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, message={self.message!r}, "
            f"retryable={self.retryable!r})"
        )

    def __str__(self) -> str:
        return f"CRM error {self.status}: {self.message}" if self.status else self.message


class CrmUnavailable(CrmError):
    """No usable answer: connection refused, timeout, or a 5xx after the retries."""


class CrmRateLimited(CrmError):
    """429 after the retries (or a Retry-After longer than the configured cap)."""


class CrmAuthError(CrmError):
    """401/403: the credential is wrong, expired, or not allowed for that location."""


class CrmNotFound(CrmError):
    """404: the record does not exist."""


class CrmRequestError(CrmError):
    """400/422 and other 4xx: the CRM refused the request as given."""


def error_for_status(status: int, message: str, *, retry_after: float | None = None) -> CrmError:
    """The typed error of one HTTP answer; 429 and 5xx are the retryable ones."""
    if status == 429:
        return CrmRateLimited(status, message, retryable=True, retry_after=retry_after)
    if status >= 500:
        return CrmUnavailable(status, message, retryable=True, retry_after=retry_after)
    if status in (401, 403):
        return CrmAuthError(status, message)
    if status == 404:
        return CrmNotFound(status, message)
    return CrmRequestError(status, message)
