"""sign-in attempts (the sign-in throttle, shared by every process)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 18:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sign_in_attempts")),
    )
    with op.batch_alter_table("sign_in_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_sign_in_attempts_key_at", ["key", "at"], unique=False)
        batch_op.create_index(batch_op.f("ix_sign_in_attempts_at"), ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("sign_in_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sign_in_attempts_at"))
        batch_op.drop_index("ix_sign_in_attempts_key_at")
    op.drop_table("sign_in_attempts")
