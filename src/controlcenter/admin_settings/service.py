"""Read the settings for display and save an administrator's changes."""

from __future__ import annotations

from collections.abc import Mapping

from controlcenter.admin_settings.names import SETTING_NAMES, mask
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.db import Database


async def masked_settings(store: SettingsStore) -> dict[str, str]:
    """All 21 names in SPEC order; unset is "", secrets masked (CONTRACT 6).

    Raises SettingsDecryptError when a stored value cannot be decrypted.
    """
    values = await store.get_many(SETTING_NAMES)
    return {name: mask(name, values.get(name, "")) for name in SETTING_NAMES}


async def update_settings(
    db: Database, store: SettingsStore, values: Mapping[str, str], user_id: str
) -> None:
    """Save the non-empty values together, recorded with the acting user's id.

    Empty strings are dropped (SPEC 4.6): a form posting back blank fields must not wipe them.
    """
    kept = {name: value for name, value in values.items() if value != ""}
    if not kept:
        return
    async with db.write() as session:
        await store.save(session, kept, user_id)
