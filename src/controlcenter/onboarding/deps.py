"""Route dependencies of onboarding: the saves, built once by the app when it starts
(`app.state.onboarding`, `app.py`)."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.onboarding.service import OnboardingSaves


async def get_onboarding_saves(request: Request) -> OnboardingSaves:
    saves: OnboardingSaves = request.app.state.onboarding
    return saves


OnboardingSavesDep = Annotated[OnboardingSaves, Depends(get_onboarding_saves)]
