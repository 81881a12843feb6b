"""Every table, imported in one place so that the metadata and Alembic's autogenerate see
them all. It sits beside app.py, above the domains: `db` (below them) never imports it; only
Alembic's `db/migrations/env.py` and the tests do."""

from controlcenter.admin_settings.models import Setting
from controlcenter.auth.attempts import SignInAttempt
from controlcenter.auth.models import ApiToken, Session, UserRecord
from controlcenter.chat.models import (
    ChatApproval,
    ChatEvent,
    ChatRun,
    Conversation,
    Message,
    RunningMessage,
)
from controlcenter.crm.rate_limit import CrmRateBucket
from controlcenter.db import Base
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import OutboxJob

__all__ = [
    "ApiToken",
    "Base",
    "ChatApproval",
    "ChatEvent",
    "ChatRun",
    "Conversation",
    "CrmRateBucket",
    "Message",
    "Onboarding",
    "OutboxJob",
    "RunningMessage",
    "Session",
    "Setting",
    "SignInAttempt",
    "UserRecord",
]
