"""an answer in flight is recorded by its events alone; a run knows its conversation; an
assistant message keeps the order of its text and tool calls

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 15:10:00.000000

The liveness row (`running_messages`) keeps the process that writes an answer and its
heartbeat, no copy of the answer: a dead process's answer is rebuilt from the run's stored
events. The conversation a run answers in moves to the run (`chat_runs.conversation_id`, no
foreign key: a run outlives its conversation), so a conversation's deletion writes no
liveness row. `messages.parts`: an assistant message's text parts and tool calls in order.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FK = "fk_running_messages_conversation_id_conversations"


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parts", sa.JSON(), nullable=True))
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("conversation_id", sa.String(length=36), nullable=True))
        batch_op.create_index(batch_op.f("ix_chat_runs_conversation_id"), ["conversation_id"])
    op.execute(
        sa.text(
            "UPDATE chat_runs SET conversation_id = (SELECT running_messages.conversation_id"
            " FROM running_messages WHERE running_messages.message_id = chat_runs.message_id)"
        )
    )
    with op.batch_alter_table("running_messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_running_messages_conversation_id"))
        batch_op.drop_constraint(batch_op.f(_FK), type_="foreignkey")
        for column in ("conversation_id", "content", "tool_calls", "tool_results"):
            batch_op.drop_column(column)


def downgrade() -> None:
    with op.batch_alter_table("running_messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("conversation_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("content", sa.Text(), server_default="", nullable=False))
        batch_op.add_column(sa.Column("tool_calls", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("tool_results", sa.JSON(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f(_FK), "conversations", ["conversation_id"], ["id"], ondelete="SET NULL"
        )
        batch_op.create_index(
            batch_op.f("ix_running_messages_conversation_id"), ["conversation_id"]
        )
    op.execute(
        sa.text(
            "UPDATE running_messages SET conversation_id = (SELECT chat_runs.conversation_id"
            " FROM chat_runs JOIN conversations ON conversations.id = chat_runs.conversation_id"
            " WHERE chat_runs.message_id = running_messages.message_id)"
        )
    )
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_runs_conversation_id"))
        batch_op.drop_column("conversation_id")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("parts")
