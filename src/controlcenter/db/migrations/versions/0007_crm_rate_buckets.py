"""the CRM's rate limit per location, shared by the processes

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 22:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import controlcenter.db

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "crm_rate_buckets",
        sa.Column("location_id", sa.String(length=64), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", controlcenter.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("location_id", name=op.f("pk_crm_rate_buckets")),
    )


def downgrade() -> None:
    op.drop_table("crm_rate_buckets")
