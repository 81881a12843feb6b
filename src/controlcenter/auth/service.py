"""Users, sessions and API tokens against the database. No HTTP here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Row, and_, bindparam, select, update
from sqlalchemy.orm import Session, defer

from controlcenter.auth.models import ROLES, ApiTokenRecord, UserRecord
from controlcenter.auth.models import Session as SessionRow
from controlcenter.auth.passwords import verify_password
from controlcenter.auth.principal import Principal
from controlcenter.auth.throttle import SignInThrottle
from controlcenter.auth.tokens import (
    decode_session,
    encode_session,
    hash_api_token,
    looks_like_jwt,
    parse_basic,
)
from controlcenter.auth.verified import CREDENTIALS, Known, verified_credentials
from controlcenter.common.emails import normalise_email
from controlcenter.db import Database, utcnow
from controlcenter.db.changes import mark_changed


class UserExistsError(Exception):
    pass


def create_user(
    session: Session, *, email: str, password_hash: str, name: str = "", role: str = "user"
) -> UserRecord:
    """Add a user whose password's Argon2 hash is `password_hash`. The caller hashes before
    the unit of work (`passwords.hash_password_off_loop` on the event loop): Argon2 takes tens
    of milliseconds by design, and a unit of work holds the database's one writer on SQLite."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    email = normalise_email(email)
    if session.scalar(select(UserRecord).where(UserRecord.email == email)) is not None:
        raise UserExistsError(email)
    user = UserRecord(email=email, name=name, role=role, password_hash=password_hash)
    session.add(user)
    session.flush()
    return user


def get_user_by_email(session: Session, email: str) -> UserRecord | None:
    return session.scalar(select(UserRecord).where(UserRecord.email == normalise_email(email)))


def _get_user(session: Session, user_id: str) -> UserRecord | None:
    return session.get(UserRecord, user_id)


async def current_user(database: Database, user_id: str) -> UserRecord | None:
    """The user's row as it is now (None once deleted or disabled), for what shows the caller
    every detail (a kept caller has no brokerage)."""
    user = await database.run_read(_get_user, user_id)
    return user if user is not None and not user.disabled else None


async def authenticate_password(database: Database, email: str, password: str) -> UserRecord | None:
    """The user when the password is theirs and the account is not disabled. Argon2 runs
    off the loop with no transaction open."""
    user = await database.run_read(get_user_by_email, email)
    ok = await verify_password(user.password_hash if user else None, password)
    return user if ok and user is not None and not user.disabled else None


def start_session(session: Session, user: UserRecord, *, key: str, ttl_s: int) -> str:
    """Record a session and return its signed JWT."""
    now = utcnow()
    row = SessionRow(user_id=user.id, created_at=now, expires_at=now + timedelta(seconds=ttl_s))
    session.add(row)
    session.flush()
    return encode_session(key, user.id, row.id, now, row.expires_at)


def start_checked_session(
    session: Session, user: UserRecord, *, key: str, ttl_s: int
) -> str | None:
    """Sign-in's write, after the password was checked with no transaction open: a session
    for `user` only while its row is still as checked (the same password hash, not disabled),
    held until the commit; None (nothing recorded) when it was deleted, disabled or given a
    new password meanwhile, which would otherwise be undone by a sign-in in flight."""
    unchanged = session.scalar(
        _STILL_AS_CHECKED, {"user_id": user.id, "password_hash": user.password_hash}
    )
    if unchanged is None:
        return None
    return start_session(session, user, key=key, ttl_s=ttl_s)


def revoke_session(session: Session, session_id: str) -> None:
    row = session.get(SessionRow, session_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
        mark_changed(session, CREDENTIALS)


# The user's row as sign-in checked it, locked until its session is recorded.
_STILL_AS_CHECKED = (
    select(UserRecord.id)
    .where(
        UserRecord.id == bindparam("user_id"),
        UserRecord.password_hash == bindparam("password_hash"),
        UserRecord.disabled.is_(False),
    )
    .with_for_update()
)

# `lastUsedAt` is written at most this often per token, so the token path stays read-only
# on almost every request (SQLite has one writer at a time).
TOKEN_USE_RESOLUTION = timedelta(minutes=1)
_ENABLED = UserRecord.disabled.is_(False)

# The statements of a credential's first check, built once with bound parameters. The caller
# they load is kept in memory with the credential, so it holds only what a change of the
# credentials topic keeps true: not the brokerage, which an onboarding save changes without
# forgetting every credential. Reading it from a kept caller raises; `current_user` reads the
# row as it is now.
_KEPT_USER = defer(UserRecord.brokerage, raiseload=True)
_SESSION_CALLER = (
    select(UserRecord, SessionRow.expires_at, SessionRow.revoked_at)
    .options(_KEPT_USER)
    .join(SessionRow, SessionRow.user_id == UserRecord.id)
    .where(
        SessionRow.id == bindparam("session_id"),
        SessionRow.user_id == bindparam("user_id"),
        _ENABLED,
    )
)
_TOKEN_CALLER = (
    select(UserRecord, ApiTokenRecord.id, ApiTokenRecord.last_used_at)
    .options(_KEPT_USER)
    .join(ApiTokenRecord, ApiTokenRecord.user_id == UserRecord.id)
    .where(ApiTokenRecord.token_hash == bindparam("token_hash"), _ENABLED)
)
# One statement answers both "who is this" and "is the secret one of their tokens", so the
# token path (what scripts and clients use) never pays for Argon2.
_BASIC_CALLER = (
    select(UserRecord, ApiTokenRecord.id, ApiTokenRecord.last_used_at)
    .options(_KEPT_USER)
    .outerjoin(
        ApiTokenRecord,
        and_(
            ApiTokenRecord.user_id == UserRecord.id,
            ApiTokenRecord.token_hash == bindparam("token_hash"),
        ),
    )
    .where(UserRecord.email == bindparam("email"), _ENABLED)
    .limit(1)
)


# The one read of a credential's first check: the caller with what the credential needs.
def _session_caller(
    session: Session, session_id: str, user_id: str
) -> Row[UserRecord, datetime, datetime | None] | None:
    params = {"session_id": session_id, "user_id": user_id}
    return session.execute(_SESSION_CALLER, params).first()


def _token_caller(
    session: Session, token_hash: str
) -> Row[UserRecord, str, datetime | None] | None:
    return session.execute(_TOKEN_CALLER, {"token_hash": token_hash}).first()


def _basic_caller(
    session: Session, email: str, token_hash: str
) -> Row[UserRecord, str, datetime | None] | None:
    return session.execute(_BASIC_CALLER, {"email": email, "token_hash": token_hash}).first()


async def principal_from_jwt(database: Database, token: str, *, key: str) -> Principal | None:
    verified = verified_credentials(database)
    kept_as = verified.key("session", key, token)
    known = verified.get(kept_as)
    if known is None:
        claims = decode_session(key, token)
        if claims is None:
            return None
        read_under = verified.reading()
        row = await database.run_read(_session_caller, claims.session_id, claims.user_id)
        if row is None:
            return None
        user, expires_at, revoked_at = row
        if revoked_at is not None or expires_at is None:
            return None
        known = Known(Principal(user=user, session_id=claims.session_id), expires_at=expires_at)
        verified.keep(read_under, kept_as, known)
    if known.expires_at is None or known.expires_at <= utcnow():
        return None
    return known.principal


async def principal_from_api_token(database: Database, token: str) -> Principal | None:
    verified = verified_credentials(database)
    kept_as = verified.key("token", token)
    known = verified.get(kept_as)
    if known is None:
        read_under = verified.reading()
        row = await database.run_read(_token_caller, hash_api_token(token))
        if row is None:
            return None
        user, token_id, used_at = row
        known = Known(Principal(user=user, session_id=None), token_id=token_id, used_at=used_at)
        verified.keep(read_under, kept_as, known)
    await _note_token_use(database, known)
    return known.principal


async def _note_token_use(database: Database, known: Known) -> None:
    """Write the token's `lastUsedAt` when the one written is older than the resolution."""
    now = utcnow()
    if known.token_id is None or (
        known.used_at is not None and now - known.used_at < TOKEN_USE_RESOLUTION
    ):
        return
    known.used_at = now
    await database.run_write(_write_token_use, known.token_id, now)


def _write_token_use(session: Session, token_id: str, now: datetime) -> None:
    session.execute(
        update(ApiTokenRecord).where(ApiTokenRecord.id == token_id).values(last_used_at=now)
    )


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
    which raises TooManyAttemptsError; a locked-out e-mail's scripts keep working. A
    credential kept from an earlier check needs neither Argon2 nor the throttle: only a
    correct one is kept.
    """
    email = normalise_email(email)
    verified = verified_credentials(database)
    kept_as = verified.key("basic", email, secret)
    known = verified.get(kept_as)
    if known is not None:
        await _note_token_use(database, known)
        return known.principal
    read_under = verified.reading()
    row = await database.run_read(_basic_caller, email, hash_api_token(secret))
    if row is not None and row[1] is not None:
        known = Known(Principal(user=row[0], session_id=None), token_id=row[1], used_at=row[2])
        verified.keep(read_under, kept_as, known)
        await _note_token_use(database, known)
        return known.principal
    if row is None:
        if guard:
            await guard.throttle.begin(email, guard.address)
        await verify_password(None, secret)  # the same time for an unknown e-mail
        return None
    user = row[0]
    # The same credentials arriving together (a script's parallel requests) wait for the
    # first one's verification instead of each running Argon2.
    await verified.settled(kept_as)
    known = verified.get(kept_as)
    if known is not None:
        return known.principal
    async with verified.verifying(kept_as):
        attempt = await guard.throttle.begin(email, guard.address) if guard else None
        if not await verify_password(user.password_hash, secret):
            return None
        known = Known(Principal(user=user, session_id=None))
        verified.keep(read_under, kept_as, known)
    if guard and attempt:
        await guard.throttle.succeeded(attempt)
    return known.principal


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


class RequestAuth:
    """Who is calling, from the credentials a request carries (the role checks of `auth.deps`).

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
