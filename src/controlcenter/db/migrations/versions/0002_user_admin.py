"""users.disabled and api_tokens.last_used_at (disabled accounts, a token's last use)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 18:55:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import controlcenter.db

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("disabled", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("last_used_at", controlcenter.db.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("last_used_at")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("disabled")
