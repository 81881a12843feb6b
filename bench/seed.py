"""Accounts and settings for a run, written with the service's own functions before it starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session
from tests.dbtools import create_api_token

from bench.deploy import Deployment
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.auth.models import UserRecord
from controlcenter.auth.passwords import hash_password
from controlcenter.auth.service import start_session
from controlcenter.common.emails import normalise_email
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade

PASSWORD = "bench-password-0123456789"  # a throwaway account on a temp database
SESSION_TTL_S = 3600


@dataclass(frozen=True)
class Account:
    id: str
    email: str
    password: str
    session: str  # session JWT, sent as `Authorization: Bearer`
    api_token: str


async def seed_accounts(
    database_url: str,
    jwt_key: str,
    prefix: str,
    count: int,
    *,
    role: str = "user",
    crm_location_id: str | None = None,
) -> list[Account]:
    """`count` users sharing one password (Argon2 hashed once: hashing is slow by design)."""
    upgrade(database_url)
    password_hash = hash_password(PASSWORD)
    database = Database(database_url)

    def add_accounts(db: Session) -> list[Account]:
        accounts: list[Account] = []
        for i in range(count):
            email = normalise_email(f"{prefix}{i}@bench.example.com")
            user = UserRecord(
                email=email,
                name=f"Bench {prefix} {i}",
                role=role,
                password_hash=password_hash,
                crm_location_id=crm_location_id,
            )
            db.add(user)
            db.flush()
            session = start_session(db, user, key=jwt_key, ttl_s=SESSION_TTL_S)
            token = create_api_token(db, user, "bench")
            accounts.append(Account(user.id, email, PASSWORD, session, token))
        return accounts

    try:
        return await database.run_write(add_accounts)
    finally:
        await database.dispose()


async def save_settings(
    database_url: str, fernet_key: str, values: Mapping[str, str], user_id: str
) -> None:
    database = Database(database_url)
    try:
        store = SettingsStore(database, fernet_key)
        await database.run_write(store.save, values, user_id)
    finally:
        await database.dispose()


async def seed_service(
    deployment: Deployment, prefix: str, count: int, settings: Mapping[str, str]
) -> list[Account]:
    """`count` users, and `settings` saved by a super admin of their own, as a run starts."""
    url, key = deployment.database_url, deployment.secret_key
    accounts = await seed_accounts(url, key, prefix, count)
    (admin,) = await seed_accounts(url, key, "admin", 1, role="super_admin")
    await save_settings(url, deployment.fernet_key, settings, admin.id)
    return accounts
