"""Settings values, encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.db import Database, utcnow


class SettingsDecryptError(Exception):
    """A stored value cannot be decrypted: the encryption key changed or the row is damaged."""


class SettingsStore:
    def __init__(self, db: Database, key: str) -> None:
        self._db = db
        self._fernet = Fernet(key.encode())

    def _decrypt(self, row: Setting) -> str:
        try:
            return self._fernet.decrypt(row.value_encrypted.encode()).decode()
        except InvalidToken as exc:
            raise SettingsDecryptError(row.name) from exc

    async def get(self, name: SettingName) -> str | None:
        """The decrypted value of one setting, None when unset or empty."""
        async with self._db.read() as session:
            row = await session.get(Setting, name)
        value = self._decrypt(row) if row is not None else ""
        return value or None

    async def get_many(self, names: Iterable[SettingName]) -> dict[str, str]:
        """Decrypted values of the names that are set."""
        wanted = list(names)
        async with self._db.read() as session:
            rows = (await session.scalars(select(Setting).where(Setting.name.in_(wanted)))).all()
        return {row.name: self._decrypt(row) for row in rows}

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
            encrypted = self._fernet.encrypt(value.encode()).decode()
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
