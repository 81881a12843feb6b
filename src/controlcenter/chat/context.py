"""The one context a chat's loop uses, built by `chat.service` once per chat."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controlcenter.auth.models import UserRecord
from controlcenter.crm.broker import broker_client, linked_location
from controlcenter.crm.transport import CrmTransport
from controlcenter.tools.base import ToolContext
from controlcenter.tools.router import Toolbox, ToolRouter


@dataclass(frozen=True)
class ChatContext:
    """One chat's view of the app, from the settings as they were when it began."""

    settings: Mapping[str, str]
    crm: CrmTransport
    tools: ToolRouter

    async def toolbox(self, user: UserRecord) -> tuple[Toolbox, ToolContext]:
        """The tools offered to the model, and who they act for (with the user's CRM client).

        Raises UnusableSettingError when the agency key cannot be sent in a header.
        """
        location_id = linked_location(user)
        toolbox = await self.tools.toolbox(self.settings, location_id=location_id)
        client = await broker_client(self.settings, self.crm, user)
        return toolbox, ToolContext(
            user_id=user.id, crm=client, settings=self.settings, location_id=location_id
        )
