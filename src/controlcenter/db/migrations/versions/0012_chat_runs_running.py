"""the runs that run now, indexed by age for the liveness task's look for runs without a row

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 22:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUNNING_NOW = "status = 'running' AND created_at IS NOT NULL"  # as in chat/models.py, when written


def upgrade() -> None:
    op.create_index(
        "ix_chat_runs_running",
        "chat_runs",
        ["created_at"],
        unique=False,
        sqlite_where=sa.text(RUNNING_NOW),
        postgresql_where=sa.text(RUNNING_NOW),
    )


def downgrade() -> None:
    op.drop_index("ix_chat_runs_running", table_name="chat_runs")
