"""Settings values, encrypted at rest by the service's one cipher (`cipher.py`).

`get_many` runs before every chat (its settings snapshot). Every stored value is read in one
query and kept in memory (`db.changes.Kept`, topic `SETTINGS`) until a save or a deletion
changes one: in this process at once, in every other process and instance within a second.
The cipher keeps decrypted values per ciphertext.

What is kept may therefore lag another process's save by up to a second: a value written as a
change of its stored value (`change`) is read again, locked, in the writing transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.orm import Session

from controlcenter.admin_settings.cipher import Cipher, SettingsDecryptError
from controlcenter.admin_settings.models import Setting
from controlcenter.admin_settings.names import SettingName
from controlcenter.db import Database, utcnow
from controlcenter.db.changes import Kept, mark_changed
from controlcenter.db.upserts import DIALECTS, upsert

__all__ = ["SettingsDecryptError", "SettingsStore"]


SETTINGS = "settings"  # the topic of the kept values
TTL_S = 60
_ALL = select(Setting.name, Setting.value_encrypted)
# FOR UPDATE is PostgreSQL's; SQLAlchemy's SQLite dialect leaves it out (the write transaction
# holds the whole database there).
_TABLE: Table = Setting.__table__  # type: ignore[assignment]  # declared as a Table
_VALUE_LOCKED = (
    select(Setting.value_encrypted).where(Setting.name == bindparam("s_name")).with_for_update()
)
_ADD = {dialect: upsert(dialect, _TABLE, key=("name",)) for dialect in DIALECTS}
_SAVE = {
    dialect: upsert(
        dialect, _TABLE, key=("name",), update=("value_encrypted", "updated_by", "updated_at")
    )
    for dialect in DIALECTS
}
_SET = (
    update(Setting)
    .where(Setting.name == bindparam("s_name"))
    .values(
        value_encrypted=bindparam("value_encrypted"),
        updated_by=bindparam("updated_by"),
        updated_at=bindparam("updated_at"),
    )
)


class SettingsStore:
    def __init__(self, db: Database, key: str) -> None:
        self._db = db
        # Shared with the other stores of secrets (the MCP servers'), one key for all.
        self.cipher = Cipher(key)
        self._kept: Kept[None, Mapping[str, str]] = Kept(
            db.changes, SETTINGS, maxsize=1, ttl_s=TTL_S
        )

    async def _stored(self) -> Mapping[str, str]:
        """Every stored value, encrypted, by name: from memory when kept."""
        stored = self._kept.get(None)
        if stored is None:
            read_under = self._kept.reading()
            stored = await self._db.run_read(_read_all)
            self._kept.keep(read_under, None, stored)
        return stored

    async def get(self, name: SettingName) -> str | None:
        """The decrypted value of one setting, None when unset or empty."""
        stored = (await self._stored()).get(name)
        value = self.cipher.decrypt(name, stored) if stored is not None else ""
        return value or None

    async def get_many(self, names: Iterable[SettingName]) -> dict[str, str]:
        """Decrypted values of the names that are set."""
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return {}
        stored = await self._stored()
        return {name: self.cipher.decrypt(name, stored[name]) for name in wanted if name in stored}

    def save(self, session: Session, values: Mapping[str, str], user_id: str) -> None:
        """Upsert `values` inside the caller's transaction, so they land together or not at all
        (a unit of work: `await db.run_write(store.save, values, user_id)`). One statement: a
        first save of a name racing another's (PostgreSQL) updates the row the other added
        instead of failing on its key."""
        now = utcnow()
        rows = [
            {
                "name": name,
                "value_encrypted": self.cipher.encrypt(value),
                "updated_by": user_id,
                "updated_at": now,
            }
            for name, value in values.items()
        ]
        if rows:
            session.execute(_SAVE[session.get_bind().dialect.name], rows)
        mark_changed(session, SETTINGS)

    def change(
        self, session: Session, name: str, change: Callable[[str | None], str], user_id: str
    ) -> str:
        """Set `name` to `change(value)`, `value` being the stored one (None when unset), inside
        the caller's transaction; returns the value set (a unit of work:
        `await db.run_write(store.change, name, change, user_id)`).

        The stored value is read in the transaction, its row locked (PostgreSQL; SQLite's write
        transaction holds the whole database), not taken from what this process keeps, which
        may not have seen another process's change yet: a change committed before this one is
        never undone. `change` runs inside the transaction, so it must be quick and pure.
        Raises SettingsDecryptError when the stored value cannot be decrypted."""
        dialect = session.get_bind().dialect.name
        while True:
            stored = session.scalar(_VALUE_LOCKED, {"s_name": name})
            value = change(None if stored is None else self.cipher.decrypt(name, stored))
            row = {
                "value_encrypted": self.cipher.encrypt(value),
                "updated_by": user_id,
                "updated_at": utcnow(),
            }
            if stored is not None:
                session.execute(_SET, {"s_name": name, **row})
                break
            added = session.execute(_ADD[dialect], {"name": name, **row})
            if getattr(added, "rowcount", 0) == 1:
                break
            # Another transaction added the row since the read (PostgreSQL, where a missing
            # row cannot be locked): the change is made again on that row, now committed.
        mark_changed(session, SETTINGS)
        return value

    def delete(self, session: Session, name: str) -> None:
        """Remove one setting inside the caller's transaction."""
        session.execute(delete(Setting).where(Setting.name == name))
        mark_changed(session, SETTINGS)


def _read_all(session: Session) -> dict[str, str]:
    return {name: value for name, value in session.execute(_ALL)}
