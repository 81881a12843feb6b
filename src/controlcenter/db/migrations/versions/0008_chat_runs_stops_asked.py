"""the running runs a stop was asked for, indexed for SQLite's poll

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 06:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STOPS_ASKED = "stop_requested AND status = 'running'"  # as in chat/models.py, when written


def upgrade() -> None:
    op.create_index(
        "ix_chat_runs_stops_asked",
        "chat_runs",
        ["message_id"],
        unique=False,
        sqlite_where=sa.text(STOPS_ASKED),
        postgresql_where=sa.text(STOPS_ASKED),
    )


def downgrade() -> None:
    op.drop_index("ix_chat_runs_stops_asked", table_name="chat_runs")
