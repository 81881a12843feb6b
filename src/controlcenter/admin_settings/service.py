"""Read the settings for display and save an administrator's changes."""

from __future__ import annotations

from collections.abc import Mapping

from controlcenter.admin_settings.names import SETTING_NAMES, is_masked_form, mask
from controlcenter.admin_settings.store import SettingsStore
from controlcenter.db import Database


async def masked_settings(store: SettingsStore) -> dict[str, str]:
    """All 21 names in `SETTING_NAMES` order; unset is "", secrets masked.

    Raises SettingsDecryptError when a stored value cannot be decrypted.
    """
    values = await store.get_many(SETTING_NAMES)
    return {name: mask(name, values.get(name, "")) for name in SETTING_NAMES}


async def update_settings(
    db: Database, store: SettingsStore, values: Mapping[str, str], user_id: str
) -> None:
    """Save the non-empty values together, recorded with the acting user's id.

    Empty strings are dropped: a form posting back blank fields must not wipe them.
    So are the masked forms of secrets: the body of a GET can be PUT back.
    """
    kept = {
        name: value
        for name, value in values.items()
        if value != "" and not is_masked_form(name, value)
    }
    if not kept:
        return
    await db.run_write(store.save, kept, user_id)


class UnknownSettingError(Exception):
    """A name outside the 21 of `SETTING_NAMES`."""


async def clear_setting(db: Database, store: SettingsStore, name: str) -> None:
    """Remove one setting's value; clearing an unset one is not an error."""
    if name not in SETTING_NAMES:
        raise UnknownSettingError(name)
    await db.run_write(store.delete, name)
