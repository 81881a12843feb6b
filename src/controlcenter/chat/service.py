"""The chat's logic around its stream (SPEC 4.2): the check that needs the settings (step 5),
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
from controlcenter.chat.agent import ChatTurn, Fallback, run_chat
from controlcenter.chat.context import ChatContext
from controlcenter.chat.liveness import Liveness
from controlcenter.chat.observed import ObservedChannel, observed_run
from controlcenter.chat.policy import CHAT_POLICY, stored_policy
from controlcenter.chat.schemas import API_KEY_SETTINGS, ChatRequest, missing_key_message
from controlcenter.chat.stream import ChatRuns, EventChannel
from controlcenter.chat.usage import tokens_this_month
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database, utcnow
from controlcenter.providers.base import PROVIDER_A, PROVIDER_B, Provider
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


class MissingApiKeyError(Exception):
    """SPEC 4.2 step 5: the chosen provider has no key; the message is the answer's `error`."""


class QuotaReachedError(Exception):
    """CONTRACT 11: the user's tokens this month reached the policy's quota (a 429)."""


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
    liveness: Liveness | None = None  # CONTRACT 13: answers cut by a dead process


async def start_chat(
    parts: ChatParts,
    user: UserRecord,
    request: ChatRequest,
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
        raise MissingApiKeyError(missing_key_message(request.provider))
    policy = stored_policy(settings.get(CHAT_POLICY))
    if policy.monthly_token_quota is not None:
        used = await tokens_this_month(parts.db, user.id, utcnow())
        if used >= policy.monthly_token_quota:
            raise QuotaReachedError(QUOTA_REACHED)
    channel = ObservedChannel(parts.liveness, ids=ids)
    turn = ChatTurn(
        user=user,
        message=request.message,
        conversation_id=request.conversation_id,
        provider=request.provider,
        api_key=api_key,
        token_deltas=token_deltas,
        approve_writes=policy.tool_approval == "writes",
        approval_timeout_s=parts.approval_timeout_s,
        fallback=_fallback(parts, request.provider, settings) if policy.fallback else None,
        context_token_budget=policy.context_token_budget,
    )
    context = ChatContext(settings=settings, crm=parts.crm, tools=parts.tools)
    provider = parts.providers[request.provider]
    run = run_chat(parts.db, provider, context, turn, channel, parts.runs)
    parts.runs.start(observed_run(run, channel, provider=request.provider))
    return channel


def _fallback(parts: ChatParts, chosen: str, settings: Mapping[str, str]) -> Fallback | None:
    """The other provider, when its key is set."""
    other = PROVIDER_B if chosen == PROVIDER_A else PROVIDER_A
    api_key = settings.get(API_KEY_SETTINGS[other], "")
    if not api_key or credential_problem(api_key) is not None:  # unusable: no fallback
        return None
    return Fallback(name=other, provider=parts.providers[other], api_key=api_key)
