"""change_stamps: the last change of each topic the processes keep in memory

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 15:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "change_stamps",
        sa.Column("topic", sa.String(length=64), nullable=False),
        sa.Column("stamp", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("topic", name=op.f("pk_change_stamps")),
    )


def downgrade() -> None:
    op.drop_table("change_stamps")
