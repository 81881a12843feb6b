"""chat runs, their stored events and usage (resuming and stopping an answer, token usage)

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-23 21:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlcenter.db import UTCDateTime

revision: str = "0005"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("usage", sa.JSON(), nullable=True))
    op.create_table(
        "chat_runs",
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("provider_calls", sa.Integer(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_chat_runs_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_chat_runs")),
    )
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_chat_runs_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_chat_runs_created_at"), ["created_at"], unique=False)
    op.create_table(
        "chat_events",
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("n", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["chat_runs.message_id"],
            name=op.f("fk_chat_events_message_id_chat_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", "n", name=op.f("pk_chat_events")),
    )
    op.create_table(
        "chat_approvals",
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("tool_call_id", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["chat_runs.message_id"],
            name=op.f("fk_chat_approvals_message_id_chat_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", "tool_call_id", name=op.f("pk_chat_approvals")),
    )


def downgrade() -> None:
    op.drop_table("chat_approvals")
    op.drop_table("chat_events")
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_runs_created_at"))
        batch_op.drop_index(batch_op.f("ix_chat_runs_user_id"))
    op.drop_table("chat_runs")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("usage")
