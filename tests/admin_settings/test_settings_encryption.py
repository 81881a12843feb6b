"""Settings values are encrypted at rest: the plaintext is nowhere in the database."""

from __future__ import annotations

import asyncio
import os
from asyncio.subprocess import PIPE
from pathlib import Path

import httpx
from cryptography.fernet import Fernet
from sqlalchemy import text
from sqlalchemy.engine import make_url

from tests.conftest import RunningServer, UserFactory
from tests.dbtools import reading

URL = "/api/v1/admin/settings"


async def test_plaintext_of_a_saved_key_is_not_in_the_database(
    client: httpx.AsyncClient, server: RunningServer, users: UserFactory
) -> None:
    admin = await users.create("super_admin")
    plaintext = f"sk-ant-api03-{os.urandom(12).hex()}"
    response = await client.put(URL, json={"providerAApiKey": plaintext}, headers=admin.headers)
    assert response.status_code == 200

    async with reading(server.db) as db:
        stored = await db.scalar(
            text("SELECT value_encrypted FROM settings WHERE name = 'providerAApiKey'")
        )
    assert isinstance(stored, str) and plaintext not in stored
    key = server.config.fernet_key.encode()
    assert Fernet(key).decrypt(stored.encode()).decode() == plaintext

    if server.db.is_sqlite:
        database = Path(str(make_url(server.db.url).database))
        files = [database, Path(f"{database}-wal")]
        # Read by another process: closing a descriptor of the live file in this one would drop
        # every POSIX lock SQLite holds on it here (sqlite.org/howtocorrupt.html, 2.2).
        existing = [str(path) for path in files if path.exists()]
        cat = await asyncio.create_subprocess_exec(*["cat", *existing], stdout=PIPE)
        raw, _ = await cat.communicate()
        assert raw, "the database files must exist"
        # The check can fail: a value stored in the clear (the user's e-mail) is found.
        assert admin.email.encode() in raw
        assert plaintext.encode() not in raw
        assert plaintext[-12:].encode() not in raw
