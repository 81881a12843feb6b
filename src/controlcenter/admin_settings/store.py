"""Settings values, encrypted at rest by the service's one cipher (`cipher.py`).

`get_many` runs before every chat (its settings snapshot); the cipher keeps decrypted values
per ciphertext.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.admin_settings.cipher import Cipher, SettingsDecryptError
from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.db import Database, utcnow

__all__ = ["SettingsDecryptError", "SettingsStore"]


class SettingsStore:
    def __init__(self, db: Database, key: str) -> None:
        self._db = db
        # Shared with the other stores of secrets (the MCP servers'), one key for all.
        self.cipher = Cipher(key)

    def _decrypt(self, row: Setting) -> str:
        return self.cipher.decrypt(row.name, row.value_encrypted)

    async def get(self, name: SettingName) -> str | None:
        """The decrypted value of one setting, None when unset or empty."""
        async with self._db.read() as session:
            row = await session.get(Setting, name)
        value = self._decrypt(row) if row is not None else ""
        return value or None

    async def get_many(self, names: Iterable[SettingName]) -> dict[str, str]:
        """Decrypted values of the names that are set."""
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return {}
        query = select(Setting.name, Setting.value_encrypted).where(Setting.name.in_(wanted))
        async with self._db.read() as session:
            stored = {name: value for name, value in await session.execute(query)}
        return {name: self.cipher.decrypt(name, stored[name]) for name in wanted if name in stored}

    async def save(self, session: AsyncSession, values: Mapping[str, str], user_id: str) -> None:
        """Upsert `values` inside the caller's transaction, so they land together or not at all."""
        now = utcnow()
        existing = {
            row.name: row
            for row in (
                await session.scalars(select(Setting).where(Setting.name.in_(list(values))))
            ).all()
        }
        for name, value in values.items():
            encrypted = self.cipher.encrypt(value)
            row = existing.get(name)
            if row is None:
                session.add(
                    Setting(
                        name=name, value_encrypted=encrypted, updated_by=user_id, updated_at=now
                    )
                )
            else:
                row.value_encrypted = encrypted
                row.updated_by = user_id
                row.updated_at = now

    async def delete(self, session: AsyncSession, name: str) -> None:
        """Remove one setting inside the caller's transaction."""
        await session.execute(delete(Setting).where(Setting.name == name))
