"""Route dependencies of the ledger: its undo, built once by the app when it starts
(`app.state.activity`, `app.py`)."""

from typing import Annotated

from fastapi import Depends, Request

from controlcenter.activity.service import Undo


async def get_undo(request: Request) -> Undo:
    undo: Undo = request.app.state.activity
    return undo


UndoDep = Annotated[Undo, Depends(get_undo)]
