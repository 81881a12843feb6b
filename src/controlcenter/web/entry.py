"""The ASGI entry of the app: FastAPI, with the dashboard index's GET taken off the top.

`ControlCenterApp.__call__` is the first of the service's code a request meets (after the
server's proxy-headers layer). GET on the index goes to `ocs.fast_path.IndexFastPath`
before FastAPI's own layers and the middleware stack; every other request, and every request
while the fast path is off (`index_fast_path` None: tracing is on, so the instrumented stack
gives the index its span), goes on to FastAPI unchanged.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from controlcenter.ocs.fast_path import IndexFastPath


class ControlCenterApp(FastAPI):
    index_fast_path: IndexFastPath | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self.index_fast_path
        if fast is not None and scope["type"] == "http" and scope["method"] == "GET":
            app_id = fast.app_id(scope["path"])
            if app_id is not None:
                await fast.answer(scope, send, app_id)
                return
        await super().__call__(scope, receive, send)
