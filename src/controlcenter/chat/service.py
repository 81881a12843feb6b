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
from controlcenter.auth.models import User
from controlcenter.chat.agent import ChatTurn, run_chat
from controlcenter.chat.context import ChatContext
from controlcenter.chat.liveness import Liveness
from controlcenter.chat.observed import ObservedChannel, observed_run
from controlcenter.chat.schemas import API_KEY_SETTINGS, ChatRequest, missing_key_message
from controlcenter.chat.stream import ChatRuns, EventChannel
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database
from controlcenter.providers.base import Provider
from controlcenter.tools.router import ToolRouter

# Everything a chat reads of the settings, in one query.
CHAT_SETTINGS: tuple[SettingName, ...] = (
    PROVIDER_A_API_KEY,
    PROVIDER_B_API_KEY,
    AGENCY_API_KEY,
    AGENCY_ID,
    MCP_SERVER_URL,
)


class MissingApiKeyError(Exception):
    """SPEC 4.2 step 5: the chosen provider has no key; the message is the answer's `error`."""


@dataclass(frozen=True)
class ChatParts:
    """What chats use of the app: the database, the settings, the shared clients."""

    db: Database
    settings: SettingsStore
    crm: CrmTransport
    providers: Mapping[str, Provider]
    tools: ToolRouter
    runs: ChatRuns
    liveness: Liveness | None = None  # CONTRACT 13: answers cut by a dead process


async def start_chat(parts: ChatParts, user: User, request: ChatRequest) -> EventChannel:
    """Check step 5 and start the chat's run, independent of the connection; the channel its
    events arrive on. Raises MissingApiKeyError when the provider has no key."""
    settings = await parts.settings.get_many(CHAT_SETTINGS)
    api_key = settings.get(API_KEY_SETTINGS[request.provider], "")
    if not api_key:
        raise MissingApiKeyError(missing_key_message(request.provider))
    channel = ObservedChannel(parts.liveness)
    turn = ChatTurn(
        user=user,
        message=request.message,
        conversation_id=request.conversation_id,
        provider=request.provider,
        api_key=api_key,
    )
    context = ChatContext(settings=settings, crm=parts.crm, tools=parts.tools)
    run = run_chat(parts.db, parts.providers[request.provider], context, turn, channel)
    parts.runs.start(observed_run(run, channel, provider=request.provider))
    return channel
