"""the ledger of the assistant's writes and their undos

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 15:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import controlcenter.db

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "activity_entries",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("conversation_id", sa.String(length=36), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=True),
        sa.Column("tool_call_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", controlcenter.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("title", sa.String(length=400), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("undo_of", sa.String(length=36), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_activity_entries_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["undo_of"],
            ["activity_entries.id"],
            name=op.f("fk_activity_entries_undo_of_activity_entries"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_activity_entries_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_activity_entries")),
    )
    op.create_index(
        "ix_activity_entries_user_created",
        "activity_entries",
        ["user_id", "created_at", "id"],
        unique=False,
    )
    op.create_index(
        "ix_activity_entries_created", "activity_entries", ["created_at", "id"], unique=False
    )
    op.create_index(
        op.f("ix_activity_entries_conversation_id"),
        "activity_entries",
        ["conversation_id"],
        unique=False,
    )
    op.create_index(
        op.f("ix_activity_entries_undo_of"), "activity_entries", ["undo_of"], unique=False
    )


def downgrade() -> None:
    op.drop_table("activity_entries")
