"""running messages and interrupted answers (an answer whose process died mid-answer)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 21:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import controlcenter.db

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("interrupted", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.create_table(
        "running_messages",
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=36), nullable=False),
        sa.Column("owner", sa.String(length=32), nullable=False),
        sa.Column("heartbeat_at", controlcenter.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", sa.JSON(), nullable=True),
        sa.Column("tool_results", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_running_messages_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_running_messages")),
    )
    with op.batch_alter_table("running_messages", schema=None) as batch_op:
        for column in ("conversation_id", "owner", "heartbeat_at"):
            batch_op.create_index(batch_op.f(f"ix_running_messages_{column}"), [column])


def downgrade() -> None:
    op.drop_table("running_messages")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("interrupted")
