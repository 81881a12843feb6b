"""API tokens (app passwords) of one user: list, create, revoke. No HTTP."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Delete, delete, select
from sqlalchemy.orm import Session

from controlcenter.auth.models import ApiTokenRecord
from controlcenter.auth.tokens import hash_api_token, new_api_token
from controlcenter.auth.verified import CREDENTIALS
from controlcenter.common.logs import get_logger
from controlcenter.common.times import iso
from controlcenter.db import Database, new_id, utcnow
from controlcenter.db.changes import mark_changed

log = get_logger(__name__)


def token_view(token: ApiTokenRecord) -> dict[str, Any]:
    """`{id, label, createdAt, lastUsedAt}`: never the secret nor its hash."""
    return {
        "id": token.id,
        "label": token.label,
        "createdAt": iso(token.created_at),
        "lastUsedAt": iso(token.last_used_at) if token.last_used_at else None,
    }


async def list_tokens(database: Database, user_id: str) -> list[ApiTokenRecord]:
    """The user's tokens, oldest first."""
    return await database.run_read(_tokens_of, user_id)


def _tokens_of(session: Session, user_id: str) -> list[ApiTokenRecord]:
    query = (
        select(ApiTokenRecord)
        .where(ApiTokenRecord.user_id == user_id)
        .order_by(ApiTokenRecord.created_at, ApiTokenRecord.id)
    )
    return list(session.scalars(query))


async def add_token(database: Database, user_id: str, label: str) -> tuple[ApiTokenRecord, str]:
    """A new token and its secret, which is returned this once and stored only as a hash."""
    secret = new_api_token()
    token = ApiTokenRecord(
        id=new_id(),
        user_id=user_id,
        label=label,
        token_hash=hash_api_token(secret),
        created_at=utcnow(),
    )
    await database.run_write(Session.add, token)
    log.info("api token created", user_id=user_id, token_id=token.id)
    return token, secret


async def revoke_token(database: Database, token_id: str, *, user_id: str | None = None) -> bool:
    """Delete a token (only among `user_id`'s when given). False when there is none."""
    query = delete(ApiTokenRecord).where(ApiTokenRecord.id == token_id)
    if user_id is not None:
        query = query.where(ApiTokenRecord.user_id == user_id)
    revoked = await database.run_write(_revoke, query)
    if revoked:
        log.info("api token revoked", token_id=token_id)
    return revoked


def _revoke(session: Session, query: Delete) -> bool:
    """Run the token's deletion; whether a token was deleted. Only a deletion changes what
    the processes keep: a token that was not there leaves their credentials alone."""
    deleted = bool(getattr(session.execute(query), "rowcount", 0))
    if deleted:
        mark_changed(session, CREDENTIALS)
    return deleted
