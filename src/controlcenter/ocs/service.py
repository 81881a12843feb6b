"""Who calls the dashboard index, and what it answers. No HTTP framework here."""

from __future__ import annotations

from controlcenter.auth.models import UserRecord
from controlcenter.auth.principal import Principal
from controlcenter.auth.service import (
    PasswordGuard,
    principal_from_authorization,
    principal_from_jwt,
)
from controlcenter.db import Database


async def index_caller(
    database: Database,
    *,
    authorization: str | None,
    session_cookie: str | None,
    key: str,
    guard: PasswordGuard | None = None,
) -> Principal | None:
    """The caller from `Authorization` (basic or bearer) or, without one, the session cookie.

    An `Authorization` header that is present decides on its own: wrong credentials are a 401
    even beside a valid cookie, so a client learns that what it sends is wrong. The cookie is
    a session JWT only (Nextcloud's OCS accepts a logged-in browser session plus the
    `OCS-APIRequest` header, which is the CSRF protection for exactly that case).
    """
    if authorization:
        return await principal_from_authorization(database, authorization, key=key, guard=guard)
    if session_cookie:
        return await principal_from_jwt(database, session_cookie, key=key)
    return None


def index_message(user: UserRecord) -> str:
    return f"Welcome to the Control Center dashboard API, {user.name or user.email}."
