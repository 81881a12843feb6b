"""Argon2id password hashing, run off the event loop because it is slow by design."""

from __future__ import annotations

import anyio.to_thread
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

# argon2id with the library's current recommended parameters.
_hasher = PasswordHasher()
# Verified when the e-mail is unknown, so that response time does not reveal which e-mails
# exist. Made on first use: every CLI call would otherwise pay for one hash at import.
_dummy_hash: str | None = None


def configure(*, time_cost: int, memory_cost: int, parallelism: int) -> None:
    """Change the cost of new hashes (existing hashes keep the parameters they carry).

    The test suite lowers it: thousands of hashes at production cost would take minutes.
    """
    global _hasher, _dummy_hash
    _hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost, parallelism=parallelism)
    _dummy_hash = None


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def _verify(password_hash: str | None, password: str) -> bool:
    global _dummy_hash
    if password_hash is None:
        _dummy_hash = _dummy_hash or _hasher.hash("controlcenter-dummy-password")
    try:
        return _hasher.verify(password_hash or _dummy_hash or "", password) and (
            password_hash is not None
        )
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches; a None hash still costs one verification."""
    return await anyio.to_thread.run_sync(_verify, password_hash, password)


async def hash_password_off_loop(password: str) -> str:
    """`hash_password` in a worker thread, for callers on the event loop."""
    return await anyio.to_thread.run_sync(hash_password, password)
