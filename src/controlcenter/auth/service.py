"""Users, sessions and API tokens against the database. No HTTP here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.auth.models import ROLES, ApiToken, Session, User
from controlcenter.auth.passwords import hash_password, verify_password
from controlcenter.auth.tokens import (
    decode_session,
    encode_session,
    hash_api_token,
    looks_like_jwt,
    new_api_token,
    parse_basic,
)
from controlcenter.db import utcnow


class UserExistsError(Exception):
    pass


@dataclass(frozen=True)
class Principal:
    """Who is calling: the user row as it is now, and the session used (None for an API token)."""

    user: User
    session_id: str | None


def normalise_email(email: str) -> str:
    return email.strip().lower()


async def create_user(
    db: AsyncSession, *, email: str, password: str, name: str = "", role: str = "user"
) -> User:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    email = normalise_email(email)
    if await db.scalar(select(User).where(User.email == email)) is not None:
        raise UserExistsError(email)
    user = User(email=email, name=name, role=role, password_hash=hash_password(password))
    db.add(user)
    await db.flush()
    return user


async def get_user_by_email(db: AsyncSession, email: str) -> User | None:
    return await db.scalar(select(User).where(User.email == normalise_email(email)))


async def authenticate_password(db: AsyncSession, email: str, password: str) -> User | None:
    user = await get_user_by_email(db, email)
    ok = await verify_password(user.password_hash if user else None, password)
    return user if ok else None


async def start_session(db: AsyncSession, user: User, *, key: str, ttl_s: int) -> str:
    """Record a session and return its signed JWT."""
    now = utcnow()
    session = Session(user_id=user.id, created_at=now, expires_at=now + timedelta(seconds=ttl_s))
    db.add(session)
    await db.flush()
    return encode_session(key, user.id, session.id, now, session.expires_at)


async def revoke_session(db: AsyncSession, session_id: str) -> None:
    session = await db.get(Session, session_id)
    if session is not None and session.revoked_at is None:
        session.revoked_at = utcnow()


async def principal_from_jwt(db: AsyncSession, token: str, *, key: str) -> Principal | None:
    claims = decode_session(key, token)
    if claims is None:
        return None
    row = (
        await db.execute(
            select(Session, User)
            .join(User, User.id == Session.user_id)
            .where(Session.id == claims.session_id, Session.user_id == claims.user_id)
        )
    ).first()
    if row is None:
        return None
    session, user = row
    if session.revoked_at is not None or session.expires_at <= utcnow():
        return None
    return Principal(user=user, session_id=session.id)


async def principal_from_api_token(db: AsyncSession, token: str) -> Principal | None:
    user = await db.scalar(
        select(User)
        .join(ApiToken, ApiToken.user_id == User.id)
        .where(ApiToken.token_hash == hash_api_token(token))
    )
    return Principal(user=user, session_id=None) if user is not None else None


async def principal_from_bearer(db: AsyncSession, token: str, *, key: str) -> Principal | None:
    """A bearer credential is a session JWT or an API token."""
    if looks_like_jwt(token):
        return await principal_from_jwt(db, token, key=key)
    return await principal_from_api_token(db, token)


async def principal_from_basic(db: AsyncSession, email: str, secret: str) -> Principal | None:
    """HTTP basic: the user's e-mail with their password or one of their API tokens.

    One query answers both "who is this" and "is the secret one of their tokens", so the
    token path (what scripts and clients use) never pays for Argon2.
    """
    row = (
        await db.execute(
            select(User, ApiToken.id)
            .outerjoin(
                ApiToken,
                and_(ApiToken.user_id == User.id, ApiToken.token_hash == hash_api_token(secret)),
            )
            .where(User.email == normalise_email(email))
            .limit(1)
        )
    ).first()
    user, token_id = (row[0], row[1]) if row is not None else (None, None)
    if user is not None and token_id is not None:
        return Principal(user=user, session_id=None)
    ok = await verify_password(user.password_hash if user else None, secret)
    return Principal(user=user, session_id=None) if ok and user is not None else None


async def principal_from_authorization(
    db: AsyncSession, header: str, *, key: str
) -> Principal | None:
    """An `Authorization` header value: `Basic` (e-mail and password or API token) or `Bearer`."""
    scheme, _, value = header.strip().partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer" and value.strip():
        return await principal_from_bearer(db, value.strip(), key=key)
    if scheme == "basic":
        credentials = parse_basic(value)
        if credentials is not None:
            return await principal_from_basic(db, *credentials)
    return None


async def create_api_token(db: AsyncSession, user: User, label: str = "") -> str:
    """Store a new token's hash; the plaintext is returned once and never stored."""
    token = new_api_token()
    db.add(ApiToken(user_id=user.id, label=label, token_hash=hash_api_token(token)))
    await db.flush()
    return token
