"""Every table, imported in one place so that metadata and Alembic see them all."""

from controlcenter.admin_settings.models import Setting
from controlcenter.auth.attempts import SignInAttempt
from controlcenter.auth.models import ApiToken, Session, User
from controlcenter.chat.models import Conversation, Message, RunningMessage
from controlcenter.db import Base
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import OutboxJob

__all__ = [
    "ApiToken",
    "Base",
    "Conversation",
    "Message",
    "Onboarding",
    "OutboxJob",
    "RunningMessage",
    "Session",
    "Setting",
    "SignInAttempt",
    "User",
]
