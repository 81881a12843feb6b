"""Argon2id password hashing, run off the event loop because it is slow by design."""

from __future__ import annotations

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters
# Verified when the e-mail is unknown, so that response time does not reveal which e-mails exist.
_DUMMY_HASH = _hasher.hash("controlcenter-dummy-password")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def _verify(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches; a None hash still costs one verification."""
    return await anyio.to_thread.run_sync(_verify, password_hash, password)
