"""Settings values, encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256).

`get_many` runs before every chat (its settings snapshot), so it is a `Lookup` (one row, a
column per name, on the lookups' own connection, compiled once) rather than an ORM query:
the ORM session, statement and entities cost ~0.5 ms a call, several times the read itself
(py-spy, `make bench`). Decrypted values are kept per ciphertext: Fernet makes a new token on
every save, so a changed value is never answered from the memo.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.db import Database, utcnow
from controlcenter.db.lookups import Lookup

# Bounds of the two memos: the code asks for a handful of name sets, and holds a few dozen
# settings; past the bound a memo starts over (never wrong, only slower once).
_LOOKUPS_KEPT = 32
_PLAIN_KEPT = 256
_settings = Setting.__table__


def values_lookup(names: tuple[str, ...]) -> Lookup:
    """One row: the stored (encrypted) value of each name in turn, NULL where unset."""
    return Lookup(
        select(
            *(
                select(_settings.c.value_encrypted)
                .where(_settings.c.name == name)
                .scalar_subquery()
                .label(f"v{i}")
                for i, name in enumerate(names)
            )
        )
    )


class SettingsDecryptError(Exception):
    """A stored value cannot be decrypted: the encryption key changed or the row is damaged."""


class SettingsStore:
    def __init__(self, db: Database, key: str) -> None:
        self._db = db
        self._fernet = Fernet(key.encode())
        self._lookups: dict[tuple[str, ...], Lookup] = {}
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
        wanted = tuple(dict.fromkeys(names))  # each once, in the caller's order
        if not wanted:
            return {}
        lookup = self._lookups.get(wanted)
        if lookup is None:
            if len(self._lookups) >= _LOOKUPS_KEPT:
                self._lookups.clear()
            lookup = self._lookups[wanted] = values_lookup(wanted)
        row = await self._db.lookup(lookup)
        assert row is not None  # a SELECT without FROM has its one row
        return {
            name: self._decrypted(name, token)
            for name, token in zip(wanted, row, strict=True)
            if token is not None
        }

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
