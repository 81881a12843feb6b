"""Settings values, encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256).

`get_many` runs before every chat (its settings snapshot), so decrypted values are kept per
ciphertext: Fernet makes a new token on every save, so a changed value is never answered from
the memo.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.db import Database, utcnow

# Past this many ciphertexts the memo starts over (never wrong, only slower once).
_PLAIN_KEPT = 256


class SettingsDecryptError(Exception):
    """A stored value cannot be decrypted: the encryption key changed or the row is damaged."""


class SettingsStore:
    def __init__(self, db: Database, key: str) -> None:
        self._db = db
        self._fernet = Fernet(key.encode())
        self._plain: dict[str, str] = {}  # ciphertext -> its value, for this key

    def _decrypt(self, row: Setting) -> str:
        return self._decrypted(row.name, row.value_encrypted)

    def _decrypted(self, name: str, token: str) -> str:
        found = self._plain.get(token)
        if found is not None:
            return found
        try:
            value = self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise SettingsDecryptError(name) from exc
        if len(self._plain) >= _PLAIN_KEPT:
            self._plain.clear()
        self._plain[token] = value
        return value

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
        return {name: self._decrypted(name, stored[name]) for name in wanted if name in stored}

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
