"""The ASGI entry of the app: FastAPI, with its hottest requests taken off the top.

`ControlCenterApp.__call__` is the first of the service's code a request meets (after the
server's proxy-headers layer). GET on the dashboard index goes to `ocs.fast_path.IndexFastPath`
and POST on the onboarding record to `onboarding.fast_path.SaveFastPath` (`web/direct.py`),
before FastAPI's own layers and the middleware stack; every other request, and every request
while the fast paths are off (None: tracing is on, so the instrumented stack gives each
request its span), goes on to FastAPI unchanged.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from controlcenter.ocs.fast_path import IndexFastPath
from controlcenter.onboarding.fast_path import PATH as SAVE_PATH
from controlcenter.onboarding.fast_path import SaveFastPath


class ControlCenterApp(FastAPI):
    index_fast_path: IndexFastPath | None = None
    save_fast_path: SaveFastPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method = scope["method"]
            if method == "GET":
                index = self.index_fast_path
                app_id = index.app_id(scope["path"]) if index is not None else None
                if index is not None and app_id is not None:
                    await index.answer(scope, send, app_id)
                    return
            elif method == "POST" and scope["path"] == SAVE_PATH:
                save = self.save_fast_path
                if save is not None:
                    await save.answer(scope, receive, send)
                    return
        await super().__call__(scope, receive, send)
