"""One shared HTTP pool to the CRM, with the retry policy and the location-token cache.

Every client (a broker's, the operator's) borrows this pool, so connections are reused
across calls and across users; only the credential and the location differ per client.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from controlcenter.config import Config
from controlcenter.crm.errors import CrmError, CrmUnavailable, error_for_status
from controlcenter.logs import get_logger

log = get_logger(__name__)

# LeadConnector versions its endpoint families separately (the `Version` header each expects).
DEFAULT_VERSION = "2021-07-28"
FAMILY_VERSIONS = {"conversations": "2021-04-15", "calendars": "2021-04-15"}

_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_MASK = "••••"


def version_for(path: str) -> str:
    """The `Version` header of the family a path belongs to (its first segment)."""
    family = path.lstrip("/").split("/", 1)[0]
    return FAMILY_VERSIONS.get(family, DEFAULT_VERSION)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_base_s: float = 0.5
    max_wait_s: float = 20.0  # cap on one wait, Retry-After included

    def backoff(self, attempt: int) -> float:
        """Exponential with jitter, so that many clients do not retry in lockstep."""
        raw: float = self.backoff_base_s * (2**attempt)
        return float(min(self.max_wait_s, raw * (0.5 + random.random() / 2)))  # noqa: S311


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


def redact(text: str, *secrets: str) -> str:
    """Never let a credential through, even if an upstream echoes it back."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, _MASK)
    return text


class CrmTransport:
    """The shared `httpx.AsyncClient` plus retries; knows nothing about locations."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 20.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            headers={"Accept": "application/json"},
            transport=transport,
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
    ) -> Any:
        """Send one call, retrying what may succeed later; the JSON answer or CrmError.

        429 is always retried (the CRM did nothing). Connection failures before a request
        was sent are always retried. 5xx and timeouts are retried only for idempotent
        calls, so a retry can never create a second contact or send a message twice.
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in _IDEMPOTENT_METHODS
        headers = {"Authorization": f"Bearer {token}", "Version": version_for(path)}
        if params:
            params = {key: value for key, value in params.items() if value is not None}
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                response = await self._http.request(
                    method, path, headers=headers, params=params, json=json, data=data
                )
            except httpx.TransportError as exc:
                sent = not isinstance(
                    exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
                )
                error: CrmError = CrmUnavailable(
                    None, f"CRM unreachable ({type(exc).__name__})", retryable=True
                )
                may_retry = idempotent or not sent
                wait = self.retry.backoff(attempt)
            else:
                if response.status_code < 400:
                    return _json_body(response)
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                error = error_for_status(
                    response.status_code,
                    redact(api_message(response), token),
                    retry_after=retry_after,
                )
                may_retry = error.retryable and (idempotent or response.status_code == 429)
                wait = retry_after if retry_after is not None else self.retry.backoff(attempt)
            if not may_retry or attempt >= self.retry.max_retries or wait > self.retry.max_wait_s:
                log.warning(
                    "crm call failed",
                    method=method,
                    path=path,
                    status=error.status,
                    attempts=attempt + 1,
                    error=error.message,
                )
                raise error
            attempt += 1
            log.info(
                "crm call retried",
                method=method,
                path=path,
                status=error.status,
                attempt=attempt,
                wait_s=round(wait, 3),
                elapsed_s=round(time.monotonic() - started, 3),
            )
            await asyncio.sleep(wait)


def _json_body(response: httpx.Response) -> Any:
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError as exc:
        raise CrmError(response.status_code, "CRM answered with something other than JSON") from exc


@dataclass
class _CachedToken:
    token: str
    expires_at: float  # time.monotonic()


class LocationTokenCache:
    """Location tokens obtained from the agency token, kept until shortly before expiry.

    HighLevel's real way to act in one sub-account with agency credentials is
    `POST /oauth/locationToken` (form `companyId`, `locationId`); tokens live about a day,
    so one exchange serves many calls. Keyed by a hash of the agency key, never the key.
    """

    _MARGIN_S = 60.0

    def __init__(self, transport: CrmTransport) -> None:
        self._transport = transport
        self._tokens: dict[tuple[str, str, str], _CachedToken] = {}
        self._lock = asyncio.Lock()

    @staticmethod
    def _key(agency_key: str, company_id: str, location_id: str) -> tuple[str, str, str]:
        return (hashlib.sha256(agency_key.encode()).hexdigest(), company_id, location_id)

    async def get(self, agency_key: str, company_id: str, location_id: str) -> str:
        key = self._key(agency_key, company_id, location_id)
        cached = self._tokens.get(key)
        if cached is not None and cached.expires_at > time.monotonic():
            return cached.token
        async with self._lock:  # one exchange at a time, so a burst of calls makes one
            cached = self._tokens.get(key)
            if cached is not None and cached.expires_at > time.monotonic():
                return cached.token
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
            self._tokens[key] = _CachedToken(
                token, time.monotonic() + max(0.0, lifetime - self._MARGIN_S)
            )
            return token

    def invalidate(self, agency_key: str, company_id: str, location_id: str) -> None:
        self._tokens.pop(self._key(agency_key, company_id, location_id), None)
