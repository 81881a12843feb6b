"""Route dependencies of the settings: the store, built once by the app when it starts
(`app.state.settings`, `app.py`)."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.admin_settings.store import SettingsStore


async def get_settings_store(request: Request) -> SettingsStore:
    store: SettingsStore = request.app.state.settings
    return store


SettingsDep = Annotated[SettingsStore, Depends(get_settings_store)]
