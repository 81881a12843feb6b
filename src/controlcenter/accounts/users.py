"""Administration of user accounts, shared by the admin API and the CLI. No HTTP.

Who may do what: a super administrator anything; an administrator only acts on accounts whose
role is `user` and only gives the role `user`; the command line acts as the operator (no
role limit). Whoever acts, the last active super administrator is never demoted, disabled or
deleted, so the service can always be administered.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.orm import Session

from controlcenter.auth.models import ADMIN, SUPER_ADMIN, USER, ApiTokenRecord, UserRecord
from controlcenter.auth.models import Session as SessionRow
from controlcenter.auth.passwords import hash_password_off_loop, verify_password
from controlcenter.auth.service import create_user
from controlcenter.auth.verified import CREDENTIALS
from controlcenter.chat.locks import hold_conversations
from controlcenter.chat.models import ConversationRow
from controlcenter.common.emails import normalise_email
from controlcenter.common.logs import get_logger
from controlcenter.common.times import iso
from controlcenter.db import Database, utcnow
from controlcenter.db.changes import mark_changed
from controlcenter.outbox.models import PENDING, OutboxJob

log = get_logger(__name__)

OPERATOR = "operator"
"""The actor of the command line: whoever can run it owns the database."""

LAST_SUPER_ADMIN = "The last active super administrator cannot be demoted, disabled or deleted"
CANCELLED = "cancelled"
GENERATED_PASSWORD_BYTES = 18  # 24 URL-safe characters


class NotFoundError(Exception):
    pass


class ForbiddenError(Exception):
    """The actor's role does not allow this change."""


class LastSuperAdminError(Exception):
    pass


class BadCursorError(Exception):
    pass


@dataclass(frozen=True)
class UserChanges:
    """A PATCH: only the fields that are not None change (`crm_location_id=""` unlinks)."""

    name: str | None = None
    role: str | None = None
    disabled: bool | None = None
    crm_location_id: str | None = None


def generate_password() -> str:
    return secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)


def admin_view(user: UserRecord) -> dict[str, Any]:
    """The user object callers see plus what an administrator needs."""
    return {
        **user.public(),
        "createdAt": iso(user.created_at),
        "disabled": bool(user.disabled),
        "crmLocationId": user.crm_location_id,
    }


def _check_may_act(actor_role: str, target_role: str, new_role: str | None = None) -> None:
    if actor_role in (SUPER_ADMIN, OPERATOR):
        return
    if actor_role != ADMIN or target_role != USER or new_role not in (None, USER):
        raise ForbiddenError


def encode_cursor(email: str) -> str:
    return base64.urlsafe_b64encode(email.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadCursorError from exc


async def list_users(
    database: Database, *, limit: int, cursor: str | None = None
) -> tuple[list[UserRecord], str | None]:
    """Users ordered by e-mail; the cursor is the last e-mail of the previous page."""
    query = select(UserRecord).order_by(UserRecord.email).limit(limit + 1)
    if cursor:
        query = query.where(UserRecord.email > decode_cursor(cursor))
    rows = await database.run_read(_users, query)
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(rows[-1].email)
    return rows, None


def _users(session: Session, query: Select[UserRecord]) -> list[UserRecord]:
    return list(session.scalars(query))


async def find_user_id(database: Database, email: str) -> str:
    user_id = await database.run_read(_user_id, normalise_email(email))
    if user_id is None:
        raise NotFoundError(email)
    return user_id


def _user_id(session: Session, email: str) -> str | None:
    return session.scalar(select(UserRecord.id).where(UserRecord.email == email))


async def add_user(
    database: Database,
    *,
    actor_role: str,
    email: str,
    name: str = "",
    role: str = USER,
    password: str | None = None,
) -> tuple[UserRecord, str | None]:
    """Create an account; returns it with the generated password (None when one was given).

    Raises UserExistsError or ForbiddenError.
    """
    _check_may_act(actor_role, USER, role)
    generated = generate_password() if password is None else None
    password_hash = await hash_password_off_loop(password or generated or "")
    user = await database.run_write(
        create_user, email=email, password_hash=password_hash, name=name, role=role
    )
    log.info("user created", user_id=user.id, role=role, by=actor_role)
    return user, generated


def _locked_target(session: Session, user_id: str) -> UserRecord:
    """The target row, plus every active super administrator locked (PostgreSQL), so that
    two administrators demoting each other at once cannot both pass the last-one check."""
    session.execute(
        select(UserRecord.id)
        .where(UserRecord.role == SUPER_ADMIN, UserRecord.disabled.is_(False))
        .with_for_update()
    )
    user = session.scalar(select(UserRecord).where(UserRecord.id == user_id).with_for_update())
    if user is None:
        raise NotFoundError(user_id)
    return user


def _check_not_last_super_admin(session: Session, user: UserRecord) -> None:
    if user.role != SUPER_ADMIN or user.disabled:
        return
    active = session.scalar(
        select(func.count())
        .select_from(UserRecord)
        .where(UserRecord.role == SUPER_ADMIN, UserRecord.disabled.is_(False))
    )
    if (active or 0) <= 1:
        raise LastSuperAdminError


def _revoke_sessions(session: Session, user_id: str, *, keep: str | None = None) -> None:
    query = update(SessionRow).where(SessionRow.user_id == user_id, SessionRow.revoked_at.is_(None))
    if keep is not None:
        query = query.where(SessionRow.id != keep)
    session.execute(query.values(revoked_at=utcnow()))


async def update_user(
    database: Database, user_id: str, changes: UserChanges, *, actor_role: str
) -> UserRecord:
    """Apply a PATCH. Disabling revokes every session and deletes every API token at once.

    Raises NotFoundError, ForbiddenError or LastSuperAdminError.
    """
    user = await database.run_write(_update, user_id, changes, actor_role)
    log.info(
        "user updated",
        user_id=user_id,
        by=actor_role,
        changed=[name for name, value in vars(changes).items() if value is not None],
    )
    return user


def _update(session: Session, user_id: str, changes: UserChanges, actor_role: str) -> UserRecord:
    user = _locked_target(session, user_id)
    _check_may_act(actor_role, user.role, changes.role)
    demoted = changes.role is not None and changes.role != SUPER_ADMIN
    if demoted or changes.disabled:
        _check_not_last_super_admin(session, user)
    if changes.name is not None:
        user.name = changes.name
    if changes.role is not None:
        user.role = changes.role
    if changes.crm_location_id is not None:
        user.crm_location_id = changes.crm_location_id or None
    if changes.disabled is not None:
        if changes.disabled and not user.disabled:
            _revoke_sessions(session, user.id)
            session.execute(delete(ApiTokenRecord).where(ApiTokenRecord.user_id == user.id))
        user.disabled = changes.disabled
    user.updated_at = utcnow()
    mark_changed(session, CREDENTIALS)  # a caller's role, name and location included
    return user


async def reset_password(
    database: Database, user_id: str, password: str | None, *, actor_role: str
) -> str | None:
    """Set a new password (generated when None, then returned) and revoke the sessions."""
    generated = generate_password() if password is None else None
    new_hash = await hash_password_off_loop(password or generated or "")
    await database.run_write(_set_password, user_id, new_hash, actor_role)
    log.info("password reset", user_id=user_id, by=actor_role)
    return generated


def _set_password(session: Session, user_id: str, new_hash: str, actor_role: str) -> None:
    user = _locked_target(session, user_id)
    _check_may_act(actor_role, user.role)
    user.password_hash = new_hash
    user.updated_at = utcnow()
    _revoke_sessions(session, user.id)
    mark_changed(session, CREDENTIALS)


async def delete_user(database: Database, user_id: str, *, actor_role: str) -> int:
    """Remove the user with sessions, tokens, conversations and onboarding record; their
    pending outbox jobs end as cancelled. Returns how many jobs were cancelled."""
    cancelled = await database.run_write(_delete, user_id, actor_role)
    log.info("user deleted", user_id=user_id, by=actor_role, cancelled_jobs=len(cancelled))
    for job_id, kind in cancelled:
        log.info("outbox job cancelled: its user was deleted", job_id=job_id, kind=kind)
    return len(cancelled)


def _delete(session: Session, user_id: str, actor_role: str) -> list[tuple[str, str]]:
    """Delete the user; the jobs it cancelled."""
    # The conversations' rows first, as every writer of them takes them (`chat.locks`), then
    # the user's: a chat of theirs ending meanwhile waits, or is waited for.
    owned = select(ConversationRow.id).where(ConversationRow.user_id == user_id)
    hold_conversations(session, list(session.scalars(owned)))
    user = _locked_target(session, user_id)
    _check_may_act(actor_role, user.role)
    _check_not_last_super_admin(session, user)
    cancelled = _cancel_jobs(session, user_id)
    # The declared `ON DELETE CASCADE` of each table removes with the user their sessions,
    # tokens, onboarding record, conversations with their messages, and runs with their
    # events.
    session.delete(user)
    mark_changed(session, CREDENTIALS)
    return cancelled


def _cancel_jobs(session: Session, user_id: str) -> list[tuple[str, str]]:
    # Payloads are JSON, which SQLite and PostgreSQL query differently; pending jobs are few,
    # so they are matched here. A job being delivered right now loses its lease: the worker's
    # outcome is then discarded (it only writes while it holds the lease).
    jobs = session.scalars(select(OutboxJob).where(OutboxJob.status == PENDING)).all()
    cancelled: list[tuple[str, str]] = []
    now = utcnow()
    for job in jobs:
        if job.payload.get("userId") == user_id:
            job.status = CANCELLED
            job.locked_until = None
            job.last_error = "user deleted"
            job.updated_at = now
            cancelled.append((job.id, job.kind))
    return cancelled


class WrongPasswordError(Exception):
    pass


async def change_own_password(
    database: Database,
    user_id: str,
    current: str,
    new: str,
    *,
    keep_session: str | None,
) -> None:
    """Check the current password, set the new one, revoke every other session."""
    password_hash = await database.run_read(_password_hash, user_id)
    if password_hash is None:
        raise NotFoundError(user_id)
    if not await verify_password(password_hash, current):
        raise WrongPasswordError
    new_hash = await hash_password_off_loop(new)
    if not await database.run_write(
        _change_password, user_id, password_hash, new_hash, keep_session
    ):
        # Deleted, or given a new password (a reset) while the current one was checked.
        raise WrongPasswordError
    log.info("password changed", user_id=user_id)


def _password_hash(session: Session, user_id: str) -> str | None:
    return session.scalar(select(UserRecord.password_hash).where(UserRecord.id == user_id))


def _change_password(
    session: Session, user_id: str, checked_hash: str, new_hash: str, keep_session: str | None
) -> bool:
    """Set the new password and revoke every session but `keep_session`, only while the
    password is still the one checked (`checked_hash`); whether it was."""
    changed = session.execute(
        update(UserRecord)
        .where(UserRecord.id == user_id, UserRecord.password_hash == checked_hash)
        .values(password_hash=new_hash, updated_at=utcnow())
    )
    if not getattr(changed, "rowcount", 0):
        return False
    _revoke_sessions(session, user_id, keep=keep_session)
    mark_changed(session, CREDENTIALS)
    return True
