"""One shared HTTP pool to the CRM, with the retry policy and the location-token cache.

Every client (a broker's, the operator's) borrows this pool, so connections are reused
across calls and across users; only the credential and the location differ per client.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import httpx
from cachetools import TLRUCache
from httpx_aiohttp import HttpxAiohttpClient
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from controlcenter.common.connections import unconnected
from controlcenter.common.logs import get_logger
from controlcenter.common.retry import WaitRetryAfter, parse_retry_after
from controlcenter.common.secrets import MASK, redact
from controlcenter.config import Config
from controlcenter.crm.errors import CrmError, CrmUnavailable, error_for_status
from controlcenter.observability import tracing

log = get_logger(__name__)

# LeadConnector versions its endpoint families separately (the `Version` header each expects).
DEFAULT_VERSION = "2021-07-28"
FAMILY_VERSIONS = {"conversations": "2021-04-15", "calendars": "2021-04-15"}

_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


def version_for(path: str) -> str:
    """The `Version` header of the family a path belongs to (its first segment)."""
    family = path.lstrip("/").split("/", 1)[0]
    return FAMILY_VERSIONS.get(family, DEFAULT_VERSION)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a CRM call is retried (the shared policy of `common.retry`)."""

    max_retries: int = 3
    backoff_base_s: float = 0.5
    max_wait_s: float = 20.0  # cap on one wait, Retry-After included

    def retrying(self, before_sleep: Callable[[RetryCallState], None]) -> AsyncRetrying:
        """Retries what the failed attempt says may be retried, while the attempts last and
        no wait is longer than `max_wait_s` (a longer Retry-After fails the call at once)."""
        return AsyncRetrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, _Failed) and exc.may_retry),
            wait=WaitRetryAfter(base_s=self.backoff_base_s, cap_s=self.max_wait_s),
            stop=self._stop,
            before_sleep=before_sleep,
            reraise=True,
        )

    def _stop(self, state: RetryCallState) -> bool:
        return state.attempt_number > self.max_retries or state.upcoming_sleep > self.max_wait_s


class RateGate(Protocol):
    """The CRM's rate limit for the location a call goes to (`crm.rate_limit`)."""

    async def acquire(self) -> None:
        """Wait for this request's turn; CrmRateLimited when it cannot come in time."""
        ...

    async def pause(self, seconds: float | None) -> None:
        """The CRM answered 429: hold the location back (`seconds`: its Retry-After)."""
        ...


class _Failed(Exception):
    """One failed attempt: the error to raise, and whether the call may be sent again."""

    def __init__(self, error: CrmError, *, may_retry: bool, retry_after: float | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.may_retry = may_retry
        self.retry_after = retry_after


def _failure(exc: httpx.TransportError) -> tuple[str, bool]:
    """What failed, in words, and whether the request may have reached the CRM (no: no
    connection was made for it, `common.connections`)."""
    if (what := unconnected(exc)) is not None:
        return what, False
    if isinstance(exc, httpx.TimeoutException):
        return "timed out", True
    return "connection lost", True


def api_message(response: httpx.Response) -> str:
    """The API's own explanation: `message` (a string or NestJS' list of strings)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or body.get("msg")
        if isinstance(message, list):
            return "; ".join(str(item) for item in message)
        if message:
            return str(message)
    return response.reason_phrase or f"HTTP {response.status_code}"


class CrmTransport:
    """The shared `httpx.AsyncClient` plus retries; knows nothing about locations."""

    def __init__(
        self, base_url: str, *, timeout_s: float = 20.0, retry: RetryPolicy | None = None
    ) -> None:
        self.retry = retry or RetryPolicy()
        # httpx's client over the aiohttp transport (`httpx-aiohttp`'s own client class, as the
        # MCP pool and the provider SDKs use that transport): with the dozens of requests an
        # outbox backlog keeps in flight, httpx's own pool costs 2.5 times its CPU per request
        # (docs/crm.md). A proxy the environment names is reached through an aiohttp transport
        # too. Every connection is kept alive.
        self._http = tracing.traced(
            HttpxAiohttpClient(
                base_url=base_url.rstrip("/"),
                timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
                headers={"Accept": "application/json"},
            )
        )
        self.location_tokens = LocationTokenCache(self)

    @classmethod
    def from_config(cls, config: Config) -> CrmTransport:
        return cls(
            config.crm_base_url,
            timeout_s=config.crm_timeout_s,
            retry=RetryPolicy(
                max_retries=config.crm_max_retries,
                backoff_base_s=config.crm_backoff_base_s,
                max_wait_s=config.crm_max_wait_s,
            ),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        token: str,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: dict[str, str] | None = None,
        idempotent: bool | None = None,
        gate: RateGate | None = None,
    ) -> Any:
        """Send one call, retrying what may succeed later; the JSON answer or CrmError.

        429 is always retried (the CRM did nothing). Connection failures before a request
        was sent are always retried. 5xx and timeouts are retried only for idempotent
        calls, so a retry can never create a second contact or send a message twice.

        With a `gate`, each attempt first waits for the location's rate limit, and a 429
        pauses the location and ends the call at once (CrmRateLimited with the wait): the
        caller decides when to come back, instead of a retry loop spending the budget.
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in _IDEMPOTENT_METHODS
        headers = {"Authorization": f"Bearer {token}", "Version": version_for(path)}
        if params:
            params = {key: value for key, value in params.items() if value is not None}
        retrying = self.retry.retrying(partial(_log_retry, method, path))
        attempts = 0
        try:
            async for attempt in retrying:
                attempts = attempt.retry_state.attempt_number
                with attempt:
                    if gate is not None:
                        await gate.acquire()
                    return await self._send(
                        method,
                        path,
                        token,
                        idempotent,
                        gate,
                        headers=headers,
                        params=params,
                        json=json,
                        data=data,
                    )
        except _Failed as failed:
            log.warning(
                "crm call failed",
                method=method,
                path=path,
                status=failed.error.status,
                attempts=attempts,
                error=failed.error.message,
            )
            raise failed.error from failed.__cause__
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    async def _send(
        self,
        method: str,
        path: str,
        token: str,
        idempotent: bool,
        gate: RateGate | None,
        **request: Any,
    ) -> Any:
        """One attempt: the JSON answer, or _Failed saying whether it may be sent again."""
        try:
            response = await self._http.request(method, path, **request)
        except httpx.TransportError as exc:
            what, sent = _failure(exc)
            error: CrmError = CrmUnavailable(None, f"CRM unreachable ({what})", retryable=True)
            raise _Failed(error, may_retry=idempotent or not sent, retry_after=None) from exc
        if response.status_code < 400:
            return _json_body(response)
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        error = error_for_status(
            response.status_code,
            redact(api_message(response), token, mask=MASK),
            retry_after=retry_after,
        )
        may_retry = error.retryable and (idempotent or response.status_code == 429)
        if response.status_code == 429 and gate is not None:
            await gate.pause(retry_after)
            may_retry = False
        raise _Failed(error, may_retry=may_retry, retry_after=retry_after)


def _log_retry(method: str, path: str, state: RetryCallState) -> None:
    failed = state.outcome.exception() if state.outcome is not None else None
    log.info(
        "crm call retried",
        method=method,
        path=path,
        status=failed.error.status if isinstance(failed, _Failed) else None,
        attempt=state.attempt_number,
        wait_s=round(state.upcoming_sleep, 3),
        elapsed_s=round(state.seconds_since_start or 0.0, 3),
    )


def _json_body(response: httpx.Response) -> Any:
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError as exc:
        raise CrmError(response.status_code, "CRM answered with something other than JSON") from exc


class LocationTokenCache:
    """Location tokens obtained from the agency token, kept until shortly before expiry.

    HighLevel's real way to act in one sub-account with agency credentials is
    `POST /oauth/locationToken` (form `companyId`, `locationId`); tokens live about a day,
    so one exchange serves many calls. Keyed by a hash of the agency key, never the key.
    """

    _MARGIN_S = 60.0
    _MAX_TOKENS = 10_000

    def __init__(self, transport: CrmTransport) -> None:
        self._transport = transport
        # Each token lives as long as its own `expires_in` says (less the margin).
        self._tokens: TLRUCache[tuple[str, str, str], tuple[str, float]] = TLRUCache(
            maxsize=self._MAX_TOKENS,
            ttu=lambda _key, value, now: now + value[1],
            timer=time.monotonic,
        )
        self._lock = asyncio.Lock()

    @staticmethod
    def _key(agency_key: str, company_id: str, location_id: str) -> tuple[str, str, str]:
        return (hashlib.sha256(agency_key.encode()).hexdigest(), company_id, location_id)

    async def get(self, agency_key: str, company_id: str, location_id: str) -> str:
        key = self._key(agency_key, company_id, location_id)
        cached = self._tokens.get(key)
        if cached is not None:
            return cached[0]
        async with self._lock:  # one exchange at a time, so a burst of calls makes one
            cached = self._tokens.get(key)
            if cached is not None:
                return cached[0]
            body = await self._transport.request(
                "POST",
                "/oauth/locationToken",
                token=agency_key,
                data={"companyId": company_id, "locationId": location_id},
                idempotent=True,
            )
            token = body.get("access_token") if isinstance(body, dict) else None
            if not isinstance(token, str) or not token:
                raise CrmError(None, "CRM returned no location token")
            expires_in = body.get("expires_in")
            lifetime = float(expires_in) if isinstance(expires_in, int | float) else 3600.0
            self._tokens[key] = (token, max(0.0, lifetime - self._MARGIN_S))
            return token

    def invalidate(self, agency_key: str, company_id: str, location_id: str) -> None:
        self._tokens.pop(self._key(agency_key, company_id, location_id), None)
