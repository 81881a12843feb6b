"""a running answer's liveness row outlives its conversation (its conversation id set to NULL)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 22:30:00.000000

The row used to be deleted with its conversation. A conversation deleted while its answer ran,
and the answer's process dying before it ended the run, left the run `running` for good: no
row told another process to close it. Now the row stays until its own process deletes it,
or another closes the run as interrupted.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FK = "fk_running_messages_conversation_id_conversations"


def _conversation_fk(on_delete: str, nullable: bool) -> None:
    with op.batch_alter_table("running_messages", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f(_FK), type_="foreignkey")
        batch_op.alter_column(
            "conversation_id", existing_type=sa.String(length=36), nullable=nullable
        )
        batch_op.create_foreign_key(
            batch_op.f(_FK), "conversations", ["conversation_id"], ["id"], ondelete=on_delete
        )


def upgrade() -> None:
    _conversation_fk("SET NULL", nullable=True)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM running_messages WHERE conversation_id IS NULL"))
    _conversation_fk("CASCADE", nullable=False)
