"""Every table, imported in one place so that the metadata and Alembic's autogenerate see
them all. It sits beside app.py, above the domains: `db` (below them) never imports it; the
tests do, and hand its metadata to autogenerate (`db.migrate.alembic_config`)."""

from controlcenter.activity.models import ActivityEntry
from controlcenter.admin_settings.models import Setting
from controlcenter.auth.attempts import SignInAttempt
from controlcenter.auth.models import ApiTokenRecord, Session, UserRecord
from controlcenter.chat.models import (
    ChatApproval,
    ChatEventRow,
    ChatRun,
    ConversationRow,
    Message,
    RunningMessage,
)
from controlcenter.crm.rate_limit import CrmRateBucket
from controlcenter.db import Base
from controlcenter.db.changes import ChangeStamp
from controlcenter.onboarding.models import Onboarding
from controlcenter.outbox.models import OutboxJob
from controlcenter.tools.mcp.models import McpServerRow

__all__ = [
    "ActivityEntry",
    "ApiTokenRecord",
    "Base",
    "ChangeStamp",
    "ChatApproval",
    "ChatEventRow",
    "ChatRun",
    "ConversationRow",
    "CrmRateBucket",
    "McpServerRow",
    "Message",
    "Onboarding",
    "OutboxJob",
    "RunningMessage",
    "Session",
    "Setting",
    "SignInAttempt",
    "UserRecord",
]
