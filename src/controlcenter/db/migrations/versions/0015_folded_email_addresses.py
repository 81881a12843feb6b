"""accounts' e-mail addresses folded: compatibility forms (NFKC) and Unicode case folding

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 15:00:00.000000

Addresses were put in NFC and lower-cased, so `ａ@example.com` (a full-width letter) could be
an account beside `a@example.com`, and `straße@` beside `strasse@`. Each stored address takes
its normal form now (NFKC and Unicode case folding), the one sign-in looks up. Where several
accounts share a normal form, the one already stored in it keeps it, else the oldest takes it;
the others keep their address as stored, each logged by id: a password sign-in finds the
account holding the normal form, their sessions and API tokens keep working, and an
administrator deletes them by id or keeps them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlcenter.common.emails import normalise_email
from controlcenter.common.logs import get_logger

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = get_logger(__name__)

users = sa.table(
    "users",
    sa.column("id", sa.String),
    sa.column("email", sa.String),
    sa.column("created_at", sa.DateTime),
)


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(users.c.id, users.c.email).order_by(users.c.created_at, users.c.id)
    ).all()
    taken = {email for _, email in rows}
    for user_id, email in rows:
        normal = normalise_email(email)
        if normal == email:
            continue
        if normal in taken:
            log.warning(
                "account address left as stored: an older account has its normal form",
                user_id=user_id,
            )
            continue
        connection.execute(sa.update(users).where(users.c.id == user_id).values(email=normal))
        taken.discard(email)
        taken.add(normal)


def downgrade() -> None:
    """The normal form is a valid spelling of each address: nothing to undo."""
