"""One harmless call to each outside system with the stored settings, for the operator.

Anthropic and OpenAI list their models through the SDKs' own `models.list()` (the provider's
client for that key), the CRM answers `GET /locations/{crmOwnerLocationId}` with the private
token through the service's CRM client, and every configured MCP server lists its tools
(`tools.mcp.status`). A missing setting, a refusal or silence is an answer (`ok` false with
the reason); every detail taken from a remote answer goes through `remote_text`, the one rule
that removes the stored credentials and cuts it short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controlcenter.admin_settings.names import (
    OWNER_LOCATION_ID,
    PRIVATE_TOKEN,
    SettingName,
)
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.admin_settings.usable import UnusableSettingError, credential_problem
from controlcenter.chat.service import API_KEY_SETTINGS
from controlcenter.common.secrets import remote_text
from controlcenter.crm.client import CrmClient, segment
from controlcenter.crm.errors import CrmError
from controlcenter.crm.transport import CrmTransport
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider, ProviderError
from controlcenter.providers.sdk import SdkProvider
from controlcenter.tools.mcp.source import McpSource
from controlcenter.tools.mcp.status import STATUS_SETTINGS, server_states, summary

CRM = "crm"
MCP = "mcp"
INTEGRATIONS = (PROVIDER_A, PROVIDER_B, CRM, MCP)
# The whole test answers within 10 s: a slower remote is reported as silent.
TEST_TIMEOUT_S = 9.0
# One call, no retries: the operator asks again when they want to.
CALL_TIMEOUT_S = 8.0

Result = tuple[bool, str]


class UnknownIntegrationError(Exception):
    """A name outside `INTEGRATIONS`."""


@dataclass(frozen=True)
class Connections:
    """The settings and the app's shared clients the tests call through."""

    settings: SettingsStore
    providers: Mapping[str, Provider]
    crm: CrmTransport
    mcp: McpSource
    mcp_timeout_s: float
    hosts: Mapping[str, str]  # integration name -> the host its test calls, for the operator

    async def test(self, name: str) -> Result:
        checks: dict[str, Callable[[], Awaitable[Result]]] = {
            PROVIDER_A: lambda: self._provider(PROVIDER_A),
            PROVIDER_B: lambda: self._provider(PROVIDER_B),
            CRM: self._crm,
            MCP: self._mcp,
        }
        check = checks.get(name)
        if check is None:
            raise UnknownIntegrationError(name)
        try:
            async with asyncio.timeout(TEST_TIMEOUT_S):
                return await check()
        except TimeoutError:
            return False, f"No answer within {TEST_TIMEOUT_S:g} s"

    async def _provider(self, name: str) -> Result:
        setting = API_KEY_SETTINGS[name]
        key, problem = await self._credential(setting)
        if problem is not None:
            return False, problem
        provider: Any = self.providers[name]
        adapter = getattr(provider, "inner", provider)  # the SDK adapter under its metrics
        if not isinstance(adapter, SdkProvider):
            return False, f"{name} cannot be tested"
        try:
            count = await adapter.list_models(api_key=key, timeout_s=CALL_TIMEOUT_S)
        except ProviderError as exc:
            if exc.status_code is None:
                return False, remote_text(self._unreached(name, exc.message), [key])
            return False, remote_text(f"Refused: {exc.status_code} {exc.message}", [key])
        return True, f"Key accepted: {_listed(count, 'model')}"

    async def _crm(self) -> Result:
        token, problem = await self._credential(PRIVATE_TOKEN)
        location = (await self.settings.get(OWNER_LOCATION_ID) or "").strip()
        # Every missing setting named at once, so one visit to Settings fixes them all.
        missing = [
            name
            for name, value in ((PRIVATE_TOKEN, token), (OWNER_LOCATION_ID, location))
            if not value
        ]
        if missing:
            return False, f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set"
        if problem is not None:
            return False, problem
        client = CrmClient(self.crm, token=token, location_id=location)
        try:
            answer = await client.get(f"/locations/{segment(location)}")
        except CrmError as exc:
            if exc.status is None:
                return False, remote_text(self._unreached(CRM, exc.message), [token])
            return False, remote_text(f"Refused: {exc.status} {exc.message}", [token])
        found = answer.get("location") if isinstance(answer, dict) else None
        name = found.get("name") if isinstance(found, dict) else None
        return True, remote_text(f"Location {name or location} reached", [token])

    async def _mcp(self) -> Result:
        """Every configured MCP server listed now, each within the call's time."""
        snapshot = await self.settings.get_many(STATUS_SETTINGS)
        states = await server_states(
            self.mcp, snapshot, timeout_s=min(self.mcp_timeout_s, CALL_TIMEOUT_S)
        )
        return summary(states)

    def _unreached(self, name: str, message: str) -> str:
        """No answer came back: the host that was called, and the client's reason."""
        host = self.hosts.get(name) or "the service"
        return f"Could not reach {host}: {message.rstrip('.') or 'no answer'}"

    async def _credential(self, name: SettingName) -> tuple[str, str | None]:
        """The stored credential, and why it cannot be used (None when it can)."""
        value = await self.settings.get(name) or ""
        if not value:
            return "", f"{name} is not set"
        problem = credential_problem(value)
        return value, (str(UnusableSettingError(name, problem)) if problem is not None else None)


def _listed(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'} listed"
