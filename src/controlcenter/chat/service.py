"""The chat's logic around its stream: the check that needs the settings (the provider's key),
and the one context a chat's loop uses, gathered once (no HTTP here).

A chat reads the settings once, before its stream: the provider's key, the agency credential
its tools act with, and the MCP server's address. Its toolbox and the user's CRM client are
built from that snapshot, so one chat sees one configuration from its start to its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controlcenter.admin_settings.names import (
    AGENCY_API_KEY,
    AGENCY_ID,
    MCP_SERVER_URL,
    PROVIDER_A_API_KEY,
    PROVIDER_B_API_KEY,
    SettingName,
)
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.admin_settings.usable import credential_problem
from controlcenter.auth.models import UserRecord
from controlcenter.chat.agent import ChatTurn, Fallback
from controlcenter.chat.channel import EventChannel
from controlcenter.chat.context import ChatContext
from controlcenter.chat.liveness import Liveness
from controlcenter.chat.observed import ObservedChannel, observed_run
from controlcenter.chat.policy import CHAT_POLICY, stored_policy
from controlcenter.chat.request import ChatInput
from controlcenter.chat.run.runs import ChatRuns
from controlcenter.chat.turn import run_chat
from controlcenter.chat.usage import tokens_this_month
from controlcenter.crm.broker import linked_location
from controlcenter.crm.tools import OPERATION_IDS
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database, utcnow
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, PROVIDERS, Provider
from controlcenter.tools.base import Tool
from controlcenter.tools.router import ToolRouter

# Everything a chat reads of the settings, in one query.
CHAT_SETTINGS: tuple[SettingName, ...] = (
    PROVIDER_A_API_KEY,
    PROVIDER_B_API_KEY,
    AGENCY_API_KEY,
    AGENCY_ID,
    MCP_SERVER_URL,
    CHAT_POLICY,
)
QUOTA_REACHED = "Monthly token quota reached"
API_KEY_SETTINGS: dict[str, SettingName] = {
    PROVIDER_A: PROVIDER_A_API_KEY,
    PROVIDER_B: PROVIDER_B_API_KEY,
}


MISSING_API_KEY = "No API key configured for {provider}. Please add it in settings."


class MissingApiKeyError(Exception):
    """The chosen provider has no key (a 400); the message is the answer's `error`."""


class QuotaReachedError(Exception):
    """The user's tokens this month reached the policy's quota (a 429)."""


@dataclass(frozen=True)
class ChatParts:
    """What chats use of the app: the database, the settings, the shared clients."""

    db: Database
    settings: SettingsStore
    crm: CrmTransport
    providers: Mapping[str, Provider]
    tools: ToolRouter
    runs: ChatRuns
    approval_timeout_s: float = 600.0
    liveness: Liveness | None = None  # closes answers cut by a dead process


async def providers_with_key(settings: SettingsStore) -> list[str]:
    """The providers a chat may choose now: those whose key is set (step 5 refuses the
    others), in their fixed order."""
    keys = await settings.get_many(tuple(API_KEY_SETTINGS.values()))
    return [name for name in PROVIDERS if keys.get(API_KEY_SETTINGS[name], "")]


async def tools_for(parts: ChatParts, user: UserRecord) -> list[Tool]:
    """The tools a chat of `user` can use, listed as the chat lists them (with its settings
    and the user's CRM location, so an MCP server that needs the location is there once it is
    linked): the CRM catalogue's only when the user's CRM location is linked (without it they
    answer that the CRM is not connected)."""
    settings = await parts.settings.get_many(CHAT_SETTINGS)
    location_id = linked_location(user)
    toolbox = await parts.tools.toolbox(settings, location_id=location_id)
    if location_id is not None:
        return toolbox.tools
    return [tool for tool in toolbox.tools if tool.name not in OPERATION_IDS]


async def start_chat(
    parts: ChatParts,
    user: UserRecord,
    request: ChatInput,
    *,
    ids: bool = False,
    token_deltas: bool = False,
) -> EventChannel:
    """Check step 5 and start the chat's run, independent of the connection; the channel its
    events arrive on (with `ids`, each frame carries its event id). Raises
    MissingApiKeyError when the provider has no key."""
    settings = await parts.settings.get_many(CHAT_SETTINGS)
    api_key = settings.get(API_KEY_SETTINGS[request.provider], "")
    if not api_key:
        raise MissingApiKeyError(MISSING_API_KEY.format(provider=request.provider))
    policy = stored_policy(settings.get(CHAT_POLICY))
    if policy.monthly_token_quota is not None:
        used = await tokens_this_month(parts.db, user.id, utcnow())
        if used >= policy.monthly_token_quota:
            raise QuotaReachedError(QUOTA_REACHED)
    # The other provider, when the policy allows it and its key is set and usable.
    other = PROVIDER_B if request.provider == PROVIDER_A else PROVIDER_A
    other_key = settings.get(API_KEY_SETTINGS[other], "")
    fallback = None
    if policy.fallback and other_key and credential_problem(other_key) is None:
        fallback = Fallback(name=other, provider=parts.providers[other], api_key=other_key)
    channel = ObservedChannel(parts.liveness, ids=ids)
    turn = ChatTurn(
        user=user,
        message=request.message,
        conversation_id=request.conversation_id,
        provider=request.provider,
        key_setting=API_KEY_SETTINGS[request.provider],
        api_key=api_key,
        token_deltas=token_deltas,
        approve_writes=policy.tool_approval == "writes",
        approval_timeout_s=parts.approval_timeout_s,
        fallback=fallback,
        context_token_budget=policy.context_token_budget,
        replace=request.replace,
    )
    context = ChatContext(settings=settings, crm=parts.crm, tools=parts.tools)
    provider = parts.providers[request.provider]
    run = run_chat(provider, context, turn, channel, parts.runs)
    parts.runs.start(observed_run(run, channel, provider=request.provider))
    return channel
