"""Users, sessions and API tokens against the database. No HTTP here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, bindparam, inspect, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import instance_dict

from controlcenter.auth.models import ADMIN, ROLES, SUPER_ADMIN, ApiToken, Session, User
from controlcenter.auth.passwords import hash_password, verify_password
from controlcenter.auth.throttle import SignInThrottle
from controlcenter.auth.tokens import (
    decode_session,
    encode_session,
    hash_api_token,
    looks_like_jwt,
    new_api_token,
    parse_basic,
)
from controlcenter.auth.verified import verified_credentials
from controlcenter.db import Database, utcnow
from controlcenter.db.lookups import Lookup


class UserExistsError(Exception):
    pass


@dataclass(frozen=True)
class Principal:
    """Who is calling: the user row as it is now, and the session used (None for an API token)."""

    user: User
    session_id: str | None

    @property
    def is_super_admin(self) -> bool:
        return self.user.role == SUPER_ADMIN

    @property
    def is_admin(self) -> bool:
        """An administrator or a super administrator."""
        return self.user.role in (ADMIN, SUPER_ADMIN)


def normalise_email(email: str) -> str:
    return email.strip().lower()


async def create_user(
    db: AsyncSession,
    *,
    email: str,
    password: str,
    name: str = "",
    role: str = "user",
    password_hash: str | None = None,
) -> User:
    """Add a user; `password_hash`, when given, is used instead of hashing `password` here
    (callers on the event loop hash beforehand, off the loop)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    email = normalise_email(email)
    if await db.scalar(select(User).where(User.email == email)) is not None:
        raise UserExistsError(email)
    user = User(
        email=email, name=name, role=role, password_hash=password_hash or hash_password(password)
    )
    db.add(user)
    await db.flush()
    return user


async def get_user_by_email(db: AsyncSession, email: str) -> User | None:
    return await db.scalar(select(User).where(User.email == normalise_email(email)))


async def authenticate_password(db: AsyncSession, email: str, password: str) -> User | None:
    """The user when the password is theirs and the account is not disabled."""
    user = await get_user_by_email(db, email)
    ok = await verify_password(user.password_hash if user else None, password)
    return user if ok and user is not None and not user.disabled else None


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


# Authentication runs on every request, so its lookups go straight to the driver
# (`Database.lookup`): one indexed statement each, no ORM session (see docs/foundation.md).
# They are built from the tables, so the columns they read are always the model's.
_users, _sessions, _tokens = User.__table__, Session.__table__, ApiToken.__table__
_USER_ATTRIBUTES = tuple((attr.key, attr.columns[0]) for attr in inspect(User).column_attrs)
_USER_COLUMNS = tuple(column for _, column in _USER_ATTRIBUTES)
_USER_KEYS = tuple(key for key, _ in _USER_ATTRIBUTES)
_USER_CLASS = inspect(User).class_manager
_ENABLED = ~_users.c.disabled
_USER_BY_SESSION = Lookup(
    select(_sessions.c.expires_at, _sessions.c.revoked_at, *_USER_COLUMNS)
    .select_from(_sessions.join(_users, _users.c.id == _sessions.c.user_id))
    .where(
        _sessions.c.id == bindparam("session_id"),
        _sessions.c.user_id == bindparam("user_id"),
        _ENABLED,
    )
)
_USER_BY_TOKEN = Lookup(
    select(*_USER_COLUMNS, _tokens.c.id, _tokens.c.last_used_at)
    .select_from(_tokens.join(_users, _users.c.id == _tokens.c.user_id))
    .where(_tokens.c.token_hash == bindparam("token_hash"), _ENABLED)
)
# One statement answers both "who is this" and "is the secret one of their tokens", so the
# token path (what scripts and clients use) never pays for Argon2. Its parameters hold the
# SHA-256 of whatever secret was sent, a password included: a secret lookup.
_USER_AND_TOKEN_BY_EMAIL = Lookup(
    select(*_USER_COLUMNS, _tokens.c.id, _tokens.c.last_used_at)
    .select_from(
        _users.outerjoin(
            _tokens,
            and_(
                _tokens.c.user_id == _users.c.id,
                _tokens.c.token_hash == bindparam("token_hash"),
            ),
        )
    )
    .where(_users.c.email == bindparam("email"), _ENABLED)
    .limit(1),
    secret=True,
)
# `lastUsedAt` is written at most this often per token, so the token path stays read-only
# on almost every request (SQLite has one writer at a time).
TOKEN_USE_RESOLUTION = timedelta(minutes=1)


def _user(values: Sequence[Any]) -> User:
    """A transient `User` holding the user columns of the lookups above, as loaded values.

    Filled in its `__dict__` as the ORM fills a loaded row (no change events): the mapped
    constructor's instrumented assignments cost more than the lookup's statement.
    """
    user: User = _USER_CLASS.new_instance()
    instance_dict(user).update(zip(_USER_KEYS, values, strict=True))
    return user


async def principal_from_jwt(database: Database, token: str, *, key: str) -> Principal | None:
    claims = decode_session(key, token)
    if claims is None:
        return None
    row = await database.lookup(
        _USER_BY_SESSION, session_id=claims.session_id, user_id=claims.user_id
    )
    if row is None:
        return None
    expires_at = row[0]
    if row[1] is not None or expires_at is None or expires_at <= utcnow():
        return None
    return Principal(user=_user(row[2:]), session_id=claims.session_id)


async def principal_from_api_token(database: Database, token: str) -> Principal | None:
    row = await database.lookup(_USER_BY_TOKEN, token_hash=hash_api_token(token))
    if row is None:
        return None
    await _note_token_use(database, row[-2], row[-1])
    return Principal(user=_user(row[:-2]), session_id=None)


async def _note_token_use(database: Database, token_id: str, previous: datetime | None) -> None:
    now = utcnow()
    if previous is not None and now - previous < TOKEN_USE_RESOLUTION:
        return
    async with database.write() as db:
        await db.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))


async def principal_from_bearer(database: Database, token: str, *, key: str) -> Principal | None:
    """A bearer credential is a session JWT or an API token."""
    if looks_like_jwt(token):
        return await principal_from_jwt(database, token, key=key)
    return await principal_from_api_token(database, token)


@dataclass(frozen=True)
class PasswordGuard:
    """The throttle a password attempt passes, and the client address it counts against."""

    throttle: SignInThrottle
    address: str | None


async def principal_from_basic(
    database: Database, email: str, secret: str, guard: PasswordGuard | None = None
) -> Principal | None:
    """HTTP basic: the user's e-mail with their password or one of their API tokens.

    A token is random and long, so only the password path passes the throttle (`guard`),
    which raises TooManyAttemptsError; a locked-out e-mail's scripts keep working.
    """
    email = normalise_email(email)
    row = await database.lookup(
        _USER_AND_TOKEN_BY_EMAIL, token_hash=hash_api_token(secret), email=email
    )
    if row is not None and row[-2] is not None:
        await _note_token_use(database, row[-2], row[-1])
        return Principal(user=_user(row[:-2]), session_id=None)
    verified = verified_credentials(database)
    if row is None:
        if guard:
            await guard.throttle.begin(email, guard.address)
        await verify_password(None, secret)  # the same time for an unknown e-mail
        return None
    user = _user(row[:-2])
    # The same credentials arriving together (a script's parallel requests) wait for the
    # first one's verification instead of each running Argon2.
    await verified.settled(email, secret)
    # Verified within the last minute against this very hash: not a guess, so neither
    # Argon2 nor the throttle (only a correct password can hit).
    if verified.hit(email, secret, user.id, user.password_hash):
        return Principal(user=user, session_id=None)
    async with verified.verifying(email, secret):
        attempt = await guard.throttle.begin(email, guard.address) if guard else None
        if not await verify_password(user.password_hash, secret):
            return None
        verified.remember(email, secret, user.id, user.password_hash)
    if guard and attempt:
        await guard.throttle.succeeded(attempt)
    return Principal(user=user, session_id=None)


async def principal_from_authorization(
    database: Database, header: str, *, key: str, guard: PasswordGuard | None = None
) -> Principal | None:
    """An `Authorization` header value: `Basic` (e-mail and password or API token) or `Bearer`."""
    scheme, _, value = header.strip().partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer" and value.strip():
        return await principal_from_bearer(database, value.strip(), key=key)
    if scheme == "basic":
        credentials = parse_basic(value)
        if credentials is not None:
            return await principal_from_basic(database, *credentials, guard)
    return None


async def create_api_token(db: AsyncSession, user: User, label: str = "") -> str:
    """Store a new token's hash; the plaintext is returned once and never stored."""
    token = new_api_token()
    db.add(ApiToken(user_id=user.id, label=label, token_hash=hash_api_token(token)))
    await db.flush()
    return token


class RequestAuth:
    """Who is calling, from the credentials a request carries (the role checks of web.deps).

    A bearer token that is present decides on its own (a wrong one is no session, even beside a
    valid cookie); the cookie only ever carries a session JWT, never an API token.
    """

    def __init__(self, database: Database, key: str) -> None:
        self._database = database
        self._key = key

    async def principal(self, bearer: str | None, session_cookie: str | None) -> Principal | None:
        if bearer:
            return await principal_from_bearer(self._database, bearer, key=self._key)
        if session_cookie:
            return await principal_from_jwt(self._database, session_cookie, key=self._key)
        return None
